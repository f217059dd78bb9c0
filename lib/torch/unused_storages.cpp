// Storages that no listed tensor uses (see unused_storages.hpp).
#include "torch/unused_storages.hpp"

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "torch/access.hpp"

namespace pthload::torch {
namespace {

// By position in checkpoint.storages (StorageState::index): a set of 100 000 storage pointers
// cost more than naming the tensors did.
void mark_used(const Storage& storage, std::vector<bool>& used) {
  const std::size_t index = internal::Access::state(storage).index;
  if (index < used.size()) used[index] = true;
}

// `pending` is scratch, reused so that a checkpoint of 100 000 tensors makes no allocation each.
void mark_used(const Tensor& tensor, std::vector<bool>& used, std::vector<const Tensor*>& pending) {
  if (!internal::Access::has_extras(tensor)) {
    if (tensor.has_storage()) mark_used(tensor.storage(), used);
    return;
  }
  pending.assign(1, &tensor);
  while (!pending.empty()) {
    const Tensor& t = *pending.back();
    pending.pop_back();
    if (t.has_storage()) mark_used(t.storage(), used);
    if (const Quantization* q = t.quantization()) {
      if (q->scales) pending.push_back(&*q->scales);
      if (q->zero_points) pending.push_back(&*q->zero_points);
    }
    for (const Tensor& part : t.parts())
      pending.push_back(&part);
  }
}

}  // namespace

void record_unused_storages(internal::CheckpointState& checkpoint) {
  const std::size_t records = checkpoint.archive ? checkpoint.archive->entries().size() : 0;
  // Indexed like the archive's entries: whether a storage was made from the record. Filled in
  // the pass that numbers the storages: every pass over 100 000 storages is 100 000 cache misses.
  std::vector<bool> accounted(records);
  for (std::size_t i = 0; i < checkpoint.storages.size(); ++i) {
    internal::StorageState& state = internal::Access::state(*checkpoint.storages[i]);
    state.index = i;
    if (state.record != nullptr) {
      accounted[static_cast<std::size_t>(state.record - checkpoint.archive->entries().data())] =
          true;
    }
  }
  std::vector<bool> used(checkpoint.storages.size());
  for (const Storage* storage : checkpoint.metadata_storages)
    mark_used(*storage, used);
  std::vector<const Tensor*> pending;
  for (const NamedTensor& named : checkpoint.tensors)
    mark_used(named.tensor, used, pending);
  // Only the unused storages are looked at again.
  for (std::size_t i = 0; i < checkpoint.storages.size(); ++i) {
    if (used[i]) continue;
    const internal::StorageState& state = internal::Access::state(*checkpoint.storages[i]);
    checkpoint.unused_storages.push_back(
        {.key = state.key,
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
    if (accounted[i]) continue;
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

}  // namespace pthload::torch
