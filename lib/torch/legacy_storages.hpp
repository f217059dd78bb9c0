// The storages of a legacy (pre-1.6) stream: made from 6-tuple persistent ids while the main
// pickle runs, then given their ranges of the file from the storage table
// (torch/serialization.py _legacy_load.persistent_load; docs/format.md §2.2, §5.1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "checkpoint/state.hpp"
#include "legacy/stream.hpp"
#include "pickle/codecs.hpp"
#include "pickle/value.hpp"

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
  /// `file` is where assign_data()'s ranges lie when not in the checkpoint's file.
  explicit LegacyStorages(internal::CheckpointState& checkpoint,
                          std::shared_ptr<const common::MappedFile> file = nullptr)
      : checkpoint_(checkpoint), file_(std::move(file)) {}

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

  internal::CheckpointState& checkpoint_;
  std::shared_ptr<const common::MappedFile> file_;
  std::unordered_map<std::string, std::shared_ptr<Storage>> roots_;
  std::unordered_map<std::string, View> views_;
};

/// Whether `value` is a torch.storage._load_from_bytes(b) call: a storage pickled by plain pickle
/// (Python's copy or multiprocessing, or an object pickled before torch.save saw it), whose
/// bytes are a whole legacy torch.save stream of that storage.
[[nodiscard]] bool is_load_from_bytes(const pickle::Value& value) noexcept;

/// What fixes a _load_from_bytes call's bytes: the node holding them and how it spells them
/// (the text _codecs.encode encodes and the encoding; a call whose argument is no bytes stands
/// for itself). Calls that spell their bytes alike through the memo give one storage, so a
/// pickle cannot make a copy of the same large bytes per call; one text encoded two ways gives
/// two. Throws as pickle::spelling_of.
[[nodiscard]] std::pair<const pickle::Value*, pickle::BytesSpelling::Form> load_from_bytes_key(
    const pickle::Value& call);

/// The storage a _load_from_bytes call holds: its bytes are copied out of the pickle and read as
/// a legacy stream whose object is one storage; the storage joins `checkpoint`'s storages, its
/// bytes a range of that copy. Throws FormatError when the bytes are no such stream.
[[nodiscard]] StorageRef load_from_bytes(internal::CheckpointState& checkpoint,
                                         const pickle::Value& call, const Limits& limits);

}  // namespace pthload::torch
