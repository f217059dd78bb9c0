// Counting unused storages (checkpoint/unused_storages.hpp) looks each used storage up by the
// position Access::add_storage noted; a storage that joined the list some other way must not be
// reported as unused for it.
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "checkpoint/unused_storages.hpp"

using pthload::internal::Access;

namespace {

std::shared_ptr<pthload::Storage> storage(const std::string& key) {
  pthload::internal::StorageState state;
  state.key = key;
  state.location = "cpu";
  state.dtype = pthload::Dtype::kFloat32;
  state.numel = 4;
  state.nbytes = 16;
  return Access::make_storage(std::move(state));
}

pthload::Tensor tensor_over(const std::shared_ptr<pthload::Storage>& over) {
  const std::vector<std::int64_t> sizes{4};
  const std::vector<std::int64_t> strides{1};
  return Access::make_tensor(over, pthload::Dtype::kFloat32, sizes, strides, 0, false);
}

// Storages "0".."count-1" in the checkpoint's list, each with its position noted
// (Access::add_storage) where `numbered`, else appended without one.
void add_storages(pthload::internal::CheckpointState& checkpoint, int count, bool numbered) {
  for (int i = 0; i < count; ++i) {
    auto made = storage(std::to_string(i));
    if (numbered) {
      (void)Access::add_storage(checkpoint, std::move(made));
    } else {
      checkpoint.storages.push_back(std::move(made));  // no position noted
    }
  }
}

std::vector<std::string> unused_keys(const pthload::internal::CheckpointState& checkpoint) {
  std::vector<std::string> keys;
  for (const auto& unused : checkpoint.unused_storages)
    keys.push_back(unused.key);
  return keys;
}

}  // namespace

TEST_CASE(
    "checkpoint: unused storages are those no listed tensor uses, however they joined the list") {
  for (const bool numbered : {true, false}) {
    CAPTURE(numbered);
    pthload::internal::CheckpointState checkpoint;
    add_storages(checkpoint, 6, numbered);
    // Tensors over storages 4, 1 and 4 again, in that order; 3 is a nested tensor's metadata.
    for (const int used : {4, 1, 4})
      checkpoint.tensors.push_back(
          {"t" + std::to_string(used), tensor_over(checkpoint.storages[used])});
    checkpoint.metadata_storages.push_back(checkpoint.storages[3].get());
    pthload::internal::record_unused_storages(checkpoint);
    CHECK(unused_keys(checkpoint) == std::vector<std::string>{"0", "2", "5"});
    for (std::size_t i = 0; i < checkpoint.storages.size(); ++i)
      CHECK(Access::state(*checkpoint.storages[i]).index == i);
  }
}

TEST_CASE("checkpoint: a tensor over a storage outside the list leaves the other tensors' marks") {
  // Counting unused storages before positions were noted passed such a storage over; the
  // tensors after it must still mark theirs (no reader makes one today: this guards the count).
  pthload::internal::CheckpointState checkpoint;
  for (int i = 0; i < 4; ++i)
    (void)Access::add_storage(checkpoint, storage(std::to_string(i)));
  const auto outside = storage("outside");
  checkpoint.tensors.push_back({"outside", tensor_over(outside)});
  checkpoint.tensors.push_back({"t2", tensor_over(checkpoint.storages[2])});
  pthload::internal::record_unused_storages(checkpoint);
  CHECK(unused_keys(checkpoint) == std::vector<std::string>{"0", "1", "3"});
}

TEST_CASE("checkpoint: the pass over the tensors notes whether one is a wrapper subclass") {
  // Placement skips looking for wrapper subclasses where this pass saw none; a wrapper it
  // missed would keep the device its tag names, whatever map_location says.
  for (const bool numbered : {true, false}) {
    for (const bool with_wrapper : {false, true}) {
      CAPTURE(numbered);
      CAPTURE(with_wrapper);
      pthload::internal::CheckpointState checkpoint;
      add_storages(checkpoint, 3, numbered);  // unnumbered: marked only after numbering
      checkpoint.tensors.push_back({"t0", tensor_over(checkpoint.storages[0])});
      if (with_wrapper) {
        const std::vector<std::int64_t> sizes{2, 3};
        const std::vector<std::int64_t> strides{3, 1};
        pthload::Tensor wrapper = Access::make_tensor(
            pthload::Layout::kStrided, pthload::Dtype::kFloat32, sizes, strides, false);
        Access::set_wrapper_subclass(
            wrapper,
            std::make_shared<const pthload::WrapperSubclass>(
                pthload::WrapperSubclass{.subclass = "my.module.Wrapper", .location = "xla:0"}),
            0);
        checkpoint.tensors.push_back({"w", std::move(wrapper)});
      }
      checkpoint.tensors.push_back({"t2", tensor_over(checkpoint.storages[2])});
      pthload::internal::record_unused_storages(checkpoint);
      CHECK(checkpoint.no_wrapper_subclasses == !with_wrapper);
      CHECK(unused_keys(checkpoint) == std::vector<std::string>{"1"});
    }
  }
}
