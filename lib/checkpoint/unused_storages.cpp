// Storages that no listed tensor uses (see unused_storages.hpp).
#include "checkpoint/unused_storages.hpp"

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/access.hpp"
#include "common/prefetch.hpp"

namespace pthload::internal {
namespace {

// Which storages the listed tensors use, by position in checkpoint.storages (StorageState::index:
// a set of 100 000 storage pointers cost more than naming the tensors did), and which records
// of the archive a storage was made from — noted in the same pass, which reads each used
// storage's state once: every pass over 100 000 storages is 100 000 cache misses.
class UseMarks {
 public:
  explicit UseMarks(const internal::CheckpointState& checkpoint)
      : checkpoint_(checkpoint),
        used_(checkpoint.storages.size()),
        accounted_(checkpoint.archive ? checkpoint.archive->entries().size() : 0) {}

  // False when `storage` is not where its index says: a storage that joined the list without
  // Access::add_storage. The caller numbers them all and starts over (start_over()); from then
  // on, such a storage is one outside the list, which no position can mark: it is passed over.
  [[nodiscard]] bool mark(const Storage& storage) {
    const internal::StorageState& state = internal::Access::state(storage);
    if (state.index >= used_.size() || checkpoint_.storages[state.index].get() != &storage) {
      return numbered_;
    }
    used_[state.index] = true;
    account(state);
    return true;
  }

  // `pending` is scratch, reused so that a checkpoint of 100 000 tensors makes no allocation
  // each.
  [[nodiscard]] bool mark(const Tensor& tensor, std::vector<const Tensor*>& pending) {
    if (!internal::Access::has_extras(tensor)) {
      return !tensor.has_storage() || mark(tensor.storage());
    }
    if (tensor.wrapper_subclass() != nullptr) saw_wrapper_subclass_ = true;
    pending.assign(1, &tensor);
    while (!pending.empty()) {
      const Tensor& t = *pending.back();
      pending.pop_back();
      if (t.has_storage() && !mark(t.storage())) return false;
      if (const Quantization* q = t.quantization()) {
        if (q->scales) pending.push_back(&*q->scales);
        if (q->zero_points) pending.push_back(&*q->zero_points);
      }
      for (const Tensor& part : t.parts())
        pending.push_back(&part);
    }
    return true;
  }

  void account(const internal::StorageState& state) {
    if (state.record != nullptr) {
      accounted_[static_cast<std::size_t>(state.record - checkpoint_.archive->entries().data())] =
          true;
    }
  }

  // Forgets every mark, once the caller has numbered every storage.
  void start_over() {
    std::fill(used_.begin(), used_.end(), false);
    std::fill(accounted_.begin(), accounted_.end(), false);
    numbered_ = true;
  }

  [[nodiscard]] bool used(std::size_t index) const { return used_[index]; }
  // Whether a listed tensor marked so far (in any pass) is a wrapper subclass.
  [[nodiscard]] bool saw_wrapper_subclass() const { return saw_wrapper_subclass_; }
  [[nodiscard]] bool accounted(std::size_t record) const { return accounted_[record]; }

 private:
  const internal::CheckpointState& checkpoint_;
  std::vector<bool> used_;
  // Indexed like the archive's entries: whether a storage was made from the record.
  std::vector<bool> accounted_;
  bool numbered_ = false;
  bool saw_wrapper_subclass_ = false;
};

// Marks what the checkpoint's metadata storages and tensors use; false as UseMarks::mark.
bool mark_all(const internal::CheckpointState& checkpoint, UseMarks& marks) {
  for (const Storage* storage : checkpoint.metadata_storages)
    if (!marks.mark(*storage)) return false;
  std::vector<const Tensor*> pending;
  // Each tensor's storage state is a cache miss, and the pass does little else: asked for ahead
  // (3.1 -> 2.2 ms for 100 000 tensors).
  const auto& tensors = checkpoint.tensors;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (i + common::kPrefetchAhead < tensors.size()) {
      if (const Tensor& ahead = tensors[i + common::kPrefetchAhead].tensor; ahead.has_storage()) {
        internal::Access::prefetch_state(ahead.storage());
      }
    }
    if (!marks.mark(tensors[i].tensor, pending)) return false;
  }
  return true;
}

}  // namespace

void record_unused_storages(internal::CheckpointState& checkpoint) {
  UseMarks marks(checkpoint);
  if (!mark_all(checkpoint, marks)) {
    for (std::size_t i = 0; i < checkpoint.storages.size(); ++i)
      internal::Access::state(*checkpoint.storages[i]).index = i;
    marks.start_over();
    (void)mark_all(checkpoint, marks);  // true now: every storage is where its index says
  }
  // Every listed tensor was marked: placement may skip looking for wrapper subclasses.
  checkpoint.no_wrapper_subclasses = !marks.saw_wrapper_subclass();
  // Only the unused storages are looked at again.
  for (std::size_t i = 0; i < checkpoint.storages.size(); ++i) {
    if (marks.used(i)) continue;
    const internal::StorageState& state = internal::Access::state(*checkpoint.storages[i]);
    marks.account(state);
    checkpoint.unused_storages.push_back(
        {.key = std::string(state.key.view()),
         .record = state.record != nullptr ? std::string(state.record->name) : std::string(),
         .nbytes = state.nbytes});
  }
  if (!checkpoint.archive) return;
  // A record under data/ that no storage was made from: its persistent id was never part of a
  // tensor (a bare storage in the pickle), or no persistent id names it at all.
  const std::string prefix = checkpoint.top_folder + "/";
  const std::string data = prefix + "data/";
  const std::string constants = prefix + "constants/";
  const std::span<const zip::Entry> entries = checkpoint.archive->entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (marks.accounted(i)) continue;
    const std::string_view name = entries[i].name;
    std::size_t key_start = 0;
    if (name.starts_with(data)) {
      key_start = data.size();
    } else if (checkpoint.format == Format::kTorchScript && name.starts_with(constants)) {
      key_start = constants.size();
    } else {
      continue;
    }
    if (name.size() == key_start) continue;
    checkpoint.unused_storages.push_back({.key = std::string(name.substr(key_start)),
                                          .record = std::string(entries[i].name),
                                          .nbytes = entries[i].uncompressed_size});
  }
}

}  // namespace pthload::internal
