// What pthload promises threads (pthload.hpp, "Threads"): loads of one file from many threads at
// once, and many threads reading one loaded Checkpoint, need no locking. The `threads` suite,
// which CI runs under ThreadSanitizer.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "device/host_backend.hpp"
#include "device/place.hpp"
#include "pthload/pthload.hpp"
#include "support/bytes.hpp"
#include "support/checkpoint_file.hpp"
#include "support/files.hpp"
#include "support/pickle_writer.hpp"

namespace pthload::test {
namespace {

constexpr int kThreads = 8;

std::uint64_t digest(const Checkpoint& checkpoint) {
  std::uint64_t sum = checkpoint.tensors().size();
  for (const auto& named : checkpoint.tensors()) {
    sum = sum * 31 + named.name.size();
    if (named.tensor.has_storage()) sum = sum * 31 + named.tensor.content_checksum();
  }
  return sum;
}

// Runs body(i) on kThreads threads started together.
template <typename Body>
void on_threads(Body&& body) {
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load())
        std::this_thread::yield();
      body(i);
    });
  }
  go = true;
  for (auto& thread : threads)
    thread.join();
}

}  // namespace

TEST_CASE("formats threads: eight threads load one file at once (views, copies, io=read)") {
  const TempPath file("_threads.pt");
  write_float_checkpoint(file.path(), std::size_t{1} << 20);
  const std::uint64_t expected = digest(load(file.path()));
  std::atomic<int> equal{0};
  on_threads([&](int i) {
    LoadOptions options{.copy_cpu_storages = i % 3 == 1};
    if (i % 3 == 2) options.io = IoStrategy::kRead;
    if (digest(load(file.path(), options)) == expected) ++equal;
  });
  CHECK(equal == kThreads);
}

TEST_CASE("formats threads: a copy load reads its storages with several threads") {
  // 40 MiB: above the size where copies are split among threads (cpu/file_copies.hpp).
  const TempPath file("_threads-copy.pt");
  write_float_checkpoint(file.path(), std::size_t{10} << 20);
  const std::uint64_t expected = digest(load(file.path()));
  for (const IoStrategy io : {IoStrategy::kMap, IoStrategy::kRead}) {
    LoadOptions options{.copy_cpu_storages = true};
    options.io = io;
    options.copy_threads = 4;
    std::uint64_t placed_seen = 0;
    options.cuda.progress = [&](std::uint64_t placed, std::uint64_t) { placed_seen = placed; };
    CHECK(digest(load(file.path(), options)) == expected);
    CHECK(placed_seen == (std::uint64_t{10} << 20) * 4);
  }
}

TEST_CASE("formats threads: a copy load's reading threads fill the small storages' shared block") {
  // 40 MiB of large storages (past the size where copies are split among threads), with runs
  // of small ones between them: their pieces of one block (cpu/packed_copies.hpp) are filled by
  // whichever thread reads their run, beside the others.
  PickleWriter p;
  p.empty_dict();
  std::vector<zip_build::Record> records;
  int key = 0;
  for (int large = 0; large < 4; ++large) {
    const int floats = (10 << 20) / 4;
    p.str("large." + std::to_string(large))
        .tensor_v2("FloatStorage", std::to_string(key), floats, 0, {floats}, {1});
    p.setitem();
    records.push_back({.name = "ck/data/" + std::to_string(key++), .data = float_record(floats)});
    for (int small = 0; small < 500; ++small) {
      p.str("small." + std::to_string(large) + "." + std::to_string(small))
          .tensor_v2("FloatStorage", std::to_string(key), 3, 0, {3}, {1});
      p.setitem();
      records.push_back({.name = "ck/data/" + std::to_string(key++), .data = float_record(3)});
    }
  }
  const auto file = checkpoint_file(p.stop().bytes(), records);
  const std::uint64_t expected = digest(load(file.path()));
  LoadOptions options{.copy_cpu_storages = true};
  options.copy_threads = 4;
  const Checkpoint copies = load(file.path(), options);
  CHECK(digest(copies) == expected);
  CHECK_FALSE(copies.tensor("small.3.499").storage().is_file_view());
}

TEST_CASE(
    "formats threads: the tensors of a large pickle are rebuilt on a second thread as it runs") {
  // 6000 tensors: a pickle past the size from which open() rebuilds dense tensors on a worker
  // thread while the machine runs (torch/prebuilt_tensors.hpp); under ThreadSanitizer, the
  // worker's reads of the machine's values and the hand-over of its results are checked, and
  // each checkpoint releasing its value tree and zip index on a second thread as it goes.
  PickleWriter p;
  p.empty_dict();
  std::vector<zip_build::Record> records;
  for (int i = 0; i < 6000; ++i) {
    p.str("state." + std::to_string(i))
        .tensor_v2("FloatStorage", std::to_string(i / 2), 4, i % 2 * 2, {2}, {1});
    p.setitem();
    if (i % 2 == 0)
      records.push_back({.name = "ck/data/" + std::to_string(i / 2), .data = float_record(4)});
  }
  const auto file = checkpoint_file(p.stop().bytes(), records);
  const Checkpoint first = load(file.path());
  REQUIRE(first.tensors().size() == 6000);
  CHECK(first.storages().size() == 3000);
  CHECK(first.tensor("state.5").storage().key() == "2");
  const std::uint64_t expected = digest(first);
  std::atomic<int> equal{0};
  on_threads([&](int) {
    if (digest(load(file.path())) == expected) ++equal;
  });
  CHECK(equal == kThreads);
}

TEST_CASE("formats threads: eight threads read one loaded Checkpoint") {
  const std::filesystem::path path = std::filesystem::path(PTHLOAD_FIXTURES_DIR) / "sample.pt";
  for (const bool copy : {false, true}) {
    const Checkpoint checkpoint = load(path, {.copy_cpu_storages = copy});
    const std::uint64_t expected = digest(checkpoint);
    std::atomic<int> equal{0};
    on_threads([&](int) {
      bool same = digest(checkpoint) == expected;
      for (const auto& named : checkpoint.tensors()) {
        same = same && &checkpoint.tensor(named.name) == &named.tensor;
        // Tensors are copied into threads: the storage's shared ownership is counted atomically.
        const Tensor copy_of = named.tensor;
        same = same && copy_of.numel() == named.tensor.numel();
      }
      if (same) ++equal;
    });
    CHECK(equal == kThreads);
  }
}

// A DLPack consumer releases its export on whatever thread it likes, even while the checkpoint's
// owner moves the storages (Tensor::hold_bytes; the host backend stands in for two GPUs).
TEST_CASE(
    "formats threads: byte holds dropped on other threads while Checkpoint::to moves storages") {
  const std::filesystem::path path = std::filesystem::path(PTHLOAD_FIXTURES_DIR) / "sample.pt";
  auto backend = std::make_shared<device::HostBackend>(device::HostBackendSettings{.devices = 2});
  const LoadOptions options{.map_location = map_to("cpu"), .copy_cpu_storages = true};
  Checkpoint checkpoint = open(path, options);
  device::place_storages(checkpoint, options, backend);
  const std::uint64_t expected = digest(checkpoint);
  for (const Device target : {Device::cuda(0), Device::cuda(1), Device::cpu(), Device::cuda(0)}) {
    std::vector<std::vector<std::shared_ptr<const void>>> holds(kThreads);
    for (auto& mine : holds)
      for (const auto& named : checkpoint.tensors())
        if (named.tensor.has_storage()) mine.push_back(named.tensor.hold_bytes());
    std::vector<std::thread> droppers;
    for (auto& mine : holds)
      droppers.emplace_back([held = std::move(mine)]() mutable { held.clear(); });
    device::move_storages(checkpoint, target, {}, backend);
    for (auto& thread : droppers)
      thread.join();
  }
  device::move_storages(checkpoint, Device::cpu(), {}, backend);
  CHECK(digest(checkpoint) == expected);
  CHECK(backend->counts().device_allocations == 0);
}

}  // namespace pthload::test
