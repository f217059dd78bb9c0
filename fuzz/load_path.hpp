// The load path shared by fuzz targets: open the bytes, report its globals and print its tree,
// place every storage on the CPU as views and then as copies, read every tensor end to end
// through its checksum, and check that both loads saw the same tensors with the same contents.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "common/mapped_file.hpp"
#include "device/place.hpp"
#include "formats/open.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/inspect.hpp"
#include "torch/globals.hpp"

namespace pthload::fuzz {

/// CPU placement with limits small enough that each input runs in milliseconds.
inline LoadOptions fuzz_options(bool copy) {
  LoadOptions options;
  options.map_location = map_to(Device::cpu());
  options.copy_cpu_storages = copy;
  options.limits.max_zip_entries = 10'000;
  options.limits.max_inflated_record_bytes = 64 << 20;
  options.limits.max_pickle_stack = 100'000;
  options.limits.max_pickle_memo = 100'000;
  options.limits.max_pickle_nesting = 200;
  options.limits.max_pickle_values = 1'000'000;
  return options;
}

/// The storages the listed tensors use: their own, a quantized tensor's parameters', the parts
/// of sparse and nested tensors', and a nested tensor's metadata.
inline std::unordered_set<const Storage*> used_storages(const Checkpoint& checkpoint) {
  std::unordered_set<const Storage*> used(
      internal::Access::state(checkpoint).metadata_storages.begin(),
      internal::Access::state(checkpoint).metadata_storages.end());
  std::vector<const Tensor*> pending;
  for (const auto& named : checkpoint.tensors())
    pending.push_back(&named.tensor);
  while (!pending.empty()) {
    const Tensor& t = *pending.back();
    pending.pop_back();
    if (t.has_storage()) used.insert(&t.storage());
    if (const auto* q = t.quantization()) {
      if (q->scales) pending.push_back(&*q->scales);
      if (q->zero_points) pending.push_back(&*q->zero_points);
    }
    for (const auto& part : t.parts())
      pending.push_back(&part);
  }
  return used;
}

/// Issue 17's property, checked apart from the naming walk and its audit: every storage is used
/// by a listed tensor or reported unused (never both, never neither), and every dense rebuild
/// call reachable in data.pkl — wherever it sits, found by a plain walk of the tree that knows no
/// naming rule — views a storage that a listed tensor uses. abort() otherwise: a tensor was
/// dropped.
inline void check_every_tensor_listed(const Checkpoint& checkpoint) {
  const auto used = used_storages(checkpoint);
  std::unordered_set<std::string> unused_records;
  std::unordered_set<std::string> unused_keys;
  for (const auto& storage : checkpoint.unused_storages()) {
    (storage.record.empty() ? unused_keys : unused_records)
        .insert(storage.record.empty() ? storage.key : storage.record);
  }
  std::unordered_set<std::string> used_records;
  std::unordered_set<std::string> used_keys;
  for (const auto& storage : checkpoint.storages()) {
    const auto& state = internal::Access::state(*storage);
    const bool is_used = used.contains(storage.get());
    const bool is_reported = state.record != nullptr
                                 ? unused_records.contains(std::string(state.record->name))
                                 : unused_keys.contains(std::string(state.key.view()));
    if (is_used == is_reported) std::abort();  // used and reported, or neither
    if (is_used)
      (state.record != nullptr ? used_records : used_keys)
          .insert(std::string(state.record != nullptr ? state.record->name : state.key.view()));
  }
  const auto& state = internal::Access::state(checkpoint);
  if (state.pickle.root == nullptr) return;
  const std::string data_prefix = state.top_folder + "/data/";
  std::unordered_set<const pickle::Value*> seen;
  std::vector<const pickle::Value*> stack{state.pickle.root};
  while (!stack.empty()) {
    const pickle::Value* value = stack.back();
    stack.pop_back();
    if (!seen.insert(value).second) continue;
    for (const pickle::Value* child : value->items())
      stack.push_back(child);
    for (const auto& entry : value->dict_items()) {
      stack.push_back(entry.key);
      stack.push_back(entry.value);
    }
    for (const pickle::Value* child : value->states())
      stack.push_back(child);
    if (!value->is(pickle::Kind::kCall)) continue;
    for (const pickle::Value* child : value->args().items())
      stack.push_back(child);
    for (const pickle::Value* child : value->added_items())
      stack.push_back(child);
    if (value->kwargs() != nullptr) stack.push_back(value->kwargs());
    const auto kind = torch::classify_global(value->callable());
    const bool dense = kind == torch::KnownGlobal::kRebuildTensor ||
                       kind == torch::KnownGlobal::kRebuildTensorV2 ||
                       kind == torch::KnownGlobal::kRebuildTensorV3;
    const auto args = value->args().items();
    if (!dense || args.empty() || !args[0]->is(pickle::Kind::kPersistent)) continue;
    const auto id = args[0]->persistent_id().items();
    if (id.size() < 3 || !id[2]->is(pickle::Kind::kString)) continue;
    const std::string key(id[2]->as_string());
    const bool listed =
        state.archive ? used_records.contains(data_prefix + key) : used_keys.contains(key);
    if (!listed) std::abort();  // a tensor the pickle rebuilds, over a storage nothing lists
  }
}

/// Loads `bytes` as views and as copies; a pthload::Error is an accepted outcome, anything else
/// (a crash, a sanitizer report) is a finding. When both loads succeed they must list the same
/// tensors with the same contents: a copy is the view's bytes in owned memory, nothing else.
inline void load_every_way(std::span<const std::byte> bytes) {
  const auto file =
      std::make_shared<const common::MappedFile>(common::MappedFile::from_bytes(bytes));
  std::optional<std::vector<std::pair<std::string, std::uint64_t>>> view_checksums;
  for (const bool copy : {false, true}) {
    try {
      const auto options = fuzz_options(copy);
      auto checkpoint = formats::open_mapped(file, "fuzz.pt", options);
      if (!copy) {
        check_every_tensor_listed(checkpoint);
        // What `pthinspect globals` and `tree` show, once per input: same tree either way.
        std::uint64_t sink = referenced_globals(checkpoint).size();
        TreeOptions tree_options;
        tree_options.max_depth = 20;
        tree_options.max_items = 20;
        sink += object_tree(checkpoint, tree_options).size();
        // Keeps the walk observable, so the optimizer cannot drop it.
        if (sink == 0x5eed) return;
      }
      device::place_storages(checkpoint, options);
      std::vector<std::pair<std::string, std::uint64_t>> checksums;
      for (const auto& named : checkpoint.tensors())
        checksums.emplace_back(named.name, named.tensor.content_checksum());
      if (!copy) {
        view_checksums = std::move(checksums);
      } else if (view_checksums && *view_checksums != checksums) {
        std::abort();  // the copy load holds other bytes, or other tensors, than the view load
      }
    } catch (const Error&) {
    }
  }
}

}  // namespace pthload::fuzz
