// Storages that no listed tensor uses (see unused_storages.hpp).
#include "torch/unused_storages.hpp"

#include <string>
#include <unordered_set>
#include <vector>

namespace pthload::torch {
namespace {

void mark_used(const Tensor& tensor, std::unordered_set<const Storage*>& used) {
  std::vector<const Tensor*> pending{&tensor};
  while (!pending.empty()) {
    const Tensor& t = *pending.back();
    pending.pop_back();
    if (t.has_storage()) used.insert(&t.storage());
    if (const Quantization* q = t.quantization()) {
      if (q->scales) pending.push_back(&*q->scales);
      if (q->zero_points) pending.push_back(&*q->zero_points);
    }
    for (const Tensor& part : t.sparse_parts())
      pending.push_back(&part);
  }
}

}  // namespace

void record_unused_storages(detail::CheckpointState& checkpoint) {
  std::unordered_set<const Storage*> used;
  for (const NamedTensor& named : checkpoint.tensors)
    mark_used(named.tensor, used);
  used.insert(checkpoint.metadata_storages.begin(), checkpoint.metadata_storages.end());
  std::unordered_set<const zip::Entry*> accounted;
  for (const auto& storage : checkpoint.storages) {
    const detail::StorageState& state = storage->state();
    if (state.record != nullptr) accounted.insert(state.record);
    if (used.contains(storage.get())) continue;
    checkpoint.unused_storages.push_back(
        {.key = state.key,
         .record = state.record != nullptr ? state.record->name : std::string(),
         .nbytes = state.nbytes});
  }
  if (!checkpoint.archive) return;
  // A record under data/ that no storage was made from: its persistent id was never part of a
  // tensor (a bare storage in the pickle), or no persistent id names it at all.
  const std::string prefix = checkpoint.top_folder + "/";
  const std::string data = prefix + "data/";
  const std::string constants = prefix + "constants/";
  for (const zip::Entry& entry : checkpoint.archive->entries()) {
    const std::string_view name = entry.name;
    std::size_t key_start = 0;
    if (name.starts_with(data)) {
      key_start = data.size();
    } else if (checkpoint.format == Format::kTorchScript && name.starts_with(constants)) {
      key_start = constants.size();
    } else {
      continue;
    }
    if (accounted.contains(&entry) || name.size() == key_start) continue;
    checkpoint.unused_storages.push_back({.key = std::string(name.substr(key_start)),
                                          .record = entry.name,
                                          .nbytes = entry.uncompressed_size});
  }
}

}  // namespace pthload::torch
