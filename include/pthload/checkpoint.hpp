// Opening and loading a checkpoint: the entry points of pthload.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pthload/export.hpp"
#include "pthload/options.hpp"
#include "pthload/tensor.hpp"

namespace pthload {

namespace internal {
// The library's own: what a Checkpoint holds, and the one class its layers reach it through
// (defined in lib/, never by users).
struct CheckpointState;
struct Access;
}  // namespace internal

/// Which container the checkpoint came in.
enum class Format : std::uint8_t {
  kZip,          ///< torch.save since 1.6
  kLegacy,       ///< torch.save before 1.6, or _use_new_zipfile_serialization=False
  kTorchScript,  ///< torch.jit.save
  kSafetensors,  ///< a safetensors file (huggingface/safetensors, safetensors.torch.save_file)
  kDcp,          ///< a torch.distributed.checkpoint directory (.metadata + .distcp files)
};
/// "zip", "legacy", "torchscript", "safetensors", "dcp".
[[nodiscard]] PTHLOAD_API std::string_view format_name(Format format) noexcept;

/// A value that looks like a tensor but is left opaque, and why: a numpy object array, a numpy
/// dtype torch has no dtype for. It is not in Checkpoint::tensors().
struct OpaqueValue {
  std::string name;    ///< its path from the root, named as tensors are
  std::string reason;  ///< for people: "numpy object array (dtype 'O'): ..."
};

/// A storage the file holds that no tensor of Checkpoint::tensors() uses. A storage pickled on
/// its own (`torch.save(t.untyped_storage())`) is one; so is a storage whose tensors a reader
/// failed to find, which is why pthinspect warns about each.
struct UnusedStorage {
  std::string key;     ///< its key in the file ("3"); the record is `<top>/data/<key>`
  std::string record;  ///< the zip record holding its bytes; empty for a legacy stream's storage
  std::uint64_t nbytes = 0;  ///< its size in bytes
};

/// A checkpoint read from a file. Owns the file mapping and the storages; tensors share their
/// storage, so they may outlive the Checkpoint. Move-only.
class PTHLOAD_API Checkpoint {
 public:
  /// Takes what `other` held; `other` may then only be destroyed or assigned to.
  Checkpoint(Checkpoint&&) noexcept;
  /// Releases the checkpoint this held as the destructor does.
  Checkpoint& operator=(Checkpoint&&) noexcept;
  /// Releases what this owns; tensors and storages kept elsewhere stay. A checkpoint read with a
  /// second parse thread (LoadOptions::parse_threads) releases part of its memory on a thread it
  /// starts and joins here.
  ~Checkpoint();

  /// The container the file came in.
  [[nodiscard]] Format format() const noexcept;
  /// Every tensor the pickle rebuilds, named by its path from the root object
  /// (docs/naming.md), in the pickle's order; a tensor reachable by several paths (tied weights)
  /// is listed once per path. A tensor no naming rule reaches is listed all the same, under a
  /// fallback name that shows its path (`opt.<state>.1.0`). Valid while the Checkpoint lives.
  [[nodiscard]] std::span<const NamedTensor> tensors() const noexcept;
  /// The tensor named `name` (the first in tensors() of that name), or nullptr when none is; one
  /// of tensors()'s, valid while the Checkpoint lives. The first lookup sorts the names once
  /// (O(n log n)), every lookup is then O(log n); safe from many threads at once. Throws
  /// std::bad_alloc (only until the index is built).
  [[nodiscard]] const Tensor* find(std::string_view name) const;
  /// find(name), for a name that must be there: throws FormatError(kTorchNameNotFound), naming
  /// the file and `name`, when it is not (and std::bad_alloc as find()).
  [[nodiscard]] const Tensor& tensor(std::string_view name) const;
  /// The tensor-like values left opaque, with the reason, in the pickle's order.
  [[nodiscard]] std::span<const OpaqueValue> opaque_values() const noexcept;
  /// Every storage, in the order the pickle first refers to them.
  [[nodiscard]] std::span<const std::shared_ptr<Storage>> storages() const noexcept;
  /// The file's own string metadata, sorted by key: a safetensors header's `__metadata__`
  /// ({"format": "pt"} from safetensors.torch). Empty for torch.save files, which have none.
  /// Valid while the Checkpoint lives.
  [[nodiscard]] std::span<const std::pair<std::string, std::string>> metadata() const noexcept;
  /// The storages and storage records that no tensor of tensors() uses, in file order; empty
  /// for the checkpoints torch.save writes of tensors. Valid while the Checkpoint lives.
  [[nodiscard]] std::span<const UnusedStorage> unused_storages() const noexcept;

  /// Moves every storage to `device` (CPU ↔ CUDA, or from one GPU to another), as
  /// `load(path, {.map_location = map_to(device)})` would have placed them; after open(), places
  /// them as load() with open()'s options would have (its verify_crc, floating_dtype,
  /// copy_cpu_storages, io), `device` as map_location and `options` as cuda. Errors name the
  /// file (ErrorContext::path). CPU storages moved from a GPU become owned copies; GPU copies go
  /// through the same pipeline as load() (`options`). `device` is checked as a map_location answer
  /// is (device.hpp); kSkipStorage is not a device here. All or nothing: when it throws
  /// (DeviceError as load(); UnsupportedError(kDeviceUnsupportedType) for kSkipStorage, a device
  /// type outside the enum, a move to meta, or a move of a checkpoint with a storage on meta, which
  /// has no bytes — torch's "Cannot copy out of meta tensor") every storage is where it was.
  /// Tensors see the move: they share their storages. The bytes a storage held before are released,
  /// so pointers taken from them (Tensor::data(), Storage::bytes()) dangle once it returns — unless
  /// a hold on them lives (Tensor::hold_bytes(), a DLPack tensor exported with to_dlpack until its
  /// deleter runs), which then owns them.
  void to(Device device, const CudaOptions& options = {});

 private:
  friend struct internal::Access;
  explicit Checkpoint(std::unique_ptr<internal::CheckpointState> state) noexcept;

  std::unique_ptr<internal::CheckpointState> state_;
};

/// Reads the checkpoint's structure — its tensors' names, dtypes, geometry and storages —
/// without touching a byte of tensor data: listing a 10 GB checkpoint reads only its headers and
/// pickle. Storages are not placed. Throws FormatError, UnsupportedError, IoError.
[[nodiscard]] PTHLOAD_API Checkpoint open(const std::filesystem::path& path,
                                          const LoadOptions& options = {});

/// open() over a checkpoint already in memory: `bytes`, which the caller owns, are read in place
/// and not copied, so they must stay alive and unchanged while the Checkpoint or any of its
/// storages lives. Errors name the file "<memory>". Throws as open().
[[nodiscard]] PTHLOAD_API Checkpoint open(std::span<const std::byte> bytes,
                                          const LoadOptions& options = {});

/// Reads the checkpoint and places every storage where options.map_location (or, without one,
/// its location tag) says: on the CPU as zero-copy views of the mapped file (or owned copies
/// with options.copy_cpu_storages), on CUDA as device memory. Throws as open(), and DeviceError
/// when a storage's device is unavailable (the message names the storage, the tag and
/// map_location).
[[nodiscard]] PTHLOAD_API Checkpoint load(const std::filesystem::path& path,
                                          const LoadOptions& options = {});

/// load() over a checkpoint in memory that the caller owns (as open(bytes)): CPU storages are
/// zero-copy views of `bytes` unless options.copy_cpu_storages, so the bytes must outlive every
/// tensor that views them. Throws as load().
[[nodiscard]] PTHLOAD_API Checkpoint load(std::span<const std::byte> bytes,
                                          const LoadOptions& options = {});

}  // namespace pthload
