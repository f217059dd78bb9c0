// Persistent ids → storages, as torch.load's persistent_load makes them
// (torch/serialization.py _load.persistent_load, _legacy_load.persistent_load; docs/format.md
// §1.4, §2.2).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/state.hpp"
#include "common/fresh_memory.hpp"
#include "common/object_arena.hpp"
#include "pickle/codecs.hpp"
#include "pickle/value.hpp"
#include "pthload/limits.hpp"
#include "pthload/tensor.hpp"
#include "torch/legacy_storages.hpp"
#include "zip/entry.hpp"

namespace pthload::torch {

/// The storages one pickle's persistent ids name: one Storage per key, however many tensors view
/// it, each checked to fit the record holding its bytes. A storage joins the checkpoint's
/// storages the first time its key is met. Not thread-safe; one per pickle.
class StorageResolver {
 public:
  /// Storages are records of the checkpoint's archive: `data_prefix` is what their keys are
  /// appended to ("model/data/"). `limits` (the caller's, which must outlive the resolver) also
  /// bound the legacy streams nested in the pickle (torch.storage._load_from_bytes).
  StorageResolver(internal::CheckpointState& checkpoint, std::string data_prefix,
                  const Limits& limits);
  /// For a legacy stream: storages come from `legacy` (which must outlive the resolver).
  StorageResolver(internal::CheckpointState& checkpoint, const LegacyStorages& legacy,
                  const Limits& limits);

  /// The storage `persistent` names: a persistent id, or a torch.storage._load_from_bytes call
  /// (a storage pickled by plain pickle). The same key or call always gives the same Storage.
  /// Throws FormatError: kTorchBadPersistentId, kTorchStorageRecordMissing,
  /// kTorchUnknownStorageType, kTorchStorageTooSmall, kTorchStorageConflict (ids of one key that
  /// disagree), kTorchBadRebuildArguments (no storage).
  [[nodiscard]] StorageRef resolve(const pickle::Value& persistent);

  /// Whether storages resolve() makes join the checkpoint's storages at once (the default) or
  /// only when register_storage() is called for them: tensors prebuilt on another thread while
  /// the pickle runs (prebuilt_tensors.hpp) make their storages in pickle order, and the
  /// checkpoint lists them in the order the naming walk meets them, as it lists those it makes
  /// itself. Set while no other call runs.
  void set_registration_deferred(bool deferred) noexcept { registration_deferred_ = deferred; }
  /// Makes `storage`, which resolve() made for a storage record, one of the checkpoint's
  /// storages if it is not yet, and returns the checkpoint's pointer to it.
  const std::shared_ptr<Storage>& register_storage(const Storage& storage);

 private:
  // The archive's entry named `name`, or nullptr: the entry after the last one found when that
  // is it (one string comparison), else Archive::find (a hash and a binary search).
  const zip::Entry* find_record(std::string_view name);

  internal::CheckpointState& checkpoint_;
  const Limits& limits_;
  std::string data_prefix_;
  const LegacyStorages* legacy_ = nullptr;
  // torch.storage._load_from_bytes calls already read, by load_from_bytes_key().
  std::map<std::pair<const pickle::Value*, pickle::BytesSpelling::Form>, StorageRef>
      nested_storages_;
  // A storage made for a record: owned here until registered, then by the checkpoint's storages
  // (at StorageState::index).
  struct Made {
    std::shared_ptr<Storage> owner;
    Storage* storage;
  };
  const std::shared_ptr<Storage>& registered(Made& made);
  // The storage `made` for an earlier persistent id of `key`, which must agree with this one.
  StorageRef known_storage(Made& made, std::string_view key, Dtype dtype, std::uint64_t numel,
                           std::string_view location);
  // Every storage made for a record, in the order made (2.4 MB for 100 000: a mapping of its
  // own).
  std::vector<Made, common::LargeArrayAllocator<Made>> made_;
  // Indexed like the archive's entries: a key names exactly one record, which must be looked up
  // anyway, so its index finds the storage without hashing the key again. Positions in made_
  // plus one, 0 for none: holding a second shared pointer here cost an atomic increment per
  // storage and, when the resolver went, a pass over every storage's count to release them.
  std::vector<std::size_t> storage_by_record_;
  bool registration_deferred_ = false;
  // Where the storages are made (Access::make_empty_storage), from the first one on.
  std::shared_ptr<common::ObjectArena> storage_arena_;
  // The storage type of the last persistent id whose type was a global, and its dtype.
  const pickle::Value* last_storage_type_ = nullptr;
  std::optional<Dtype> last_storage_dtype_;
  // Reused, so naming the record costs no allocation per storage.
  std::string record_name_scratch_;
  // The entry after the last storage record found: torch writes storage records in the order
  // its pickler meets them, so that is usually the next one asked for (see find_record).
  std::size_t next_record_ = 0;
  // The storage of made_ after the last one register_storage() found: the naming walk meets
  // prebuilt tensors in the order the worker made their storages, so that is usually the one
  // asked for, and comparing addresses finds it without reading the storage's state.
  std::size_t next_registered_ = 0;
};

}  // namespace pthload::torch
