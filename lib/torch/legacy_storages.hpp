// The storages of a legacy (pre-1.6) stream: made from 6-tuple persistent ids while the main
// pickle runs, then given their ranges of the file from the storage table
// (torch/serialization.py _legacy_load.persistent_load; FORMAT.md §2.2, §5.1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "legacy/stream.hpp"
#include "pickle/value.hpp"
#include "torch/state.hpp"

namespace pthload::torch {

/// A tensor's storage as a persistent id gives it: the root storage, and for a legacy storage
/// view the slice of it the tensor's offsets are relative to.
struct StorageRef {
  std::shared_ptr<const Storage> storage;
  std::uint64_t view_byte_offset = 0;        ///< where the view starts in the root
  std::optional<std::uint64_t> view_nbytes;  ///< the view's size; nullopt: the whole root
};

/// The legacy persistent ids of one checkpoint, by key. Not thread-safe; one per open().
class LegacyStorages {
 public:
  explicit LegacyStorages(detail::CheckpointState& checkpoint) : checkpoint_(checkpoint) {}

  /// For the main pickle's persistent_load, called in file order as torch calls it: makes the
  /// root storage of a ('storage', type, root_key, location, numel, view_metadata) id the
  /// first time its key appears (the first id's type and size win, as in torch) and records
  /// its view. ('module', class, ...) ids stay opaque values. Returns nullptr (the id stays a
  /// kPersistent). Throws FormatError for a malformed id or a view outside its root.
  const pickle::Value* on_persistent_id(const pickle::Value& id);

  /// The storage a (legacy) persistent id names, which on_persistent_id() has seen.
  [[nodiscard]] StorageRef storage_of(const pickle::Value& id) const;

  /// Gives every storage its file range from the data section of `stream`: the key list must
  /// name exactly the storages the persistent ids made, and each count must equal the numel
  /// of its persistent id (torch: "storage has wrong byte size"). Throws FormatError.
  void assign_data(const legacy::Stream& stream);

 private:
  struct View {
    std::string root_key;
    std::uint64_t byte_offset = 0;
    std::uint64_t nbytes = 0;
  };

  detail::CheckpointState& checkpoint_;
  std::unordered_map<std::string, std::shared_ptr<Storage>> roots_;
  std::unordered_map<std::string, View> views_;
};

}  // namespace pthload::torch
