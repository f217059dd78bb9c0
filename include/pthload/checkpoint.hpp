// Opening and loading a checkpoint: the entry points of pthload.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pthload/export.hpp"
#include "pthload/options.hpp"
#include "pthload/tensor.hpp"

namespace pthload {

namespace detail {
struct CheckpointState;
}

/// Which container the checkpoint came in.
enum class Format : std::uint8_t {
  kZip,          ///< torch.save since 1.6
  kLegacy,       ///< torch.save before 1.6, or _use_new_zipfile_serialization=False
  kTorchScript,  ///< torch.jit.save
};
/// "zip", "legacy", "torchscript".
[[nodiscard]] PTHLOAD_API std::string_view format_name(Format format) noexcept;

/// A value that looks like a tensor but is left opaque, and why: a numpy object array, a numpy
/// dtype torch has no dtype for. It is not in Checkpoint::tensors().
struct OpaqueValue {
  std::string name;    ///< its path from the root, named as tensors are
  std::string reason;  ///< for people: "numpy object array (dtype 'O'): ..."
};

/// A checkpoint read from a file. Owns the file mapping and the storages; tensors share their
/// storage, so they may outlive the Checkpoint. Move-only.
class PTHLOAD_API Checkpoint {
 public:
  explicit Checkpoint(std::unique_ptr<detail::CheckpointState> state) noexcept;
  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  [[nodiscard]] Format format() const noexcept;
  /// Every tensor, named by its path from the root object, in the pickle's order; a tensor
  /// reachable by several paths (tied weights) is listed once per path. Valid while the
  /// Checkpoint lives.
  [[nodiscard]] std::span<const NamedTensor> tensors() const noexcept;
  /// The tensor named `name`; throws FormatError(kTorchNameNotFound).
  [[nodiscard]] const Tensor& tensor(std::string_view name) const;
  /// The tensor-like values left opaque, with the reason, in the pickle's order.
  [[nodiscard]] std::span<const OpaqueValue> opaque_values() const noexcept;
  /// Every storage, in the order the pickle first refers to them.
  [[nodiscard]] std::span<const std::shared_ptr<Storage>> storages() const noexcept;

  /// Moves every storage to `device` (CPU ↔ CUDA, or from one GPU to another), as
  /// `load(path, {.map_location = map_to(device)})` would have placed them; after open(), places
  /// them. CPU storages become owned copies; GPU copies go through the same pipeline as load()
  /// (`options`). All or nothing: when it throws (DeviceError as load(); UnsupportedError for
  /// meta) every storage is where it was. Tensors see the move: they share their storages.
  void to(Device device, const CudaOptions& options = {});

  /// For the library's own layers.
  [[nodiscard]] detail::CheckpointState& state() noexcept { return *state_; }
  [[nodiscard]] const detail::CheckpointState& state() const noexcept { return *state_; }

 private:
  std::unique_ptr<detail::CheckpointState> state_;
};

/// Reads the checkpoint's structure — its tensors' names, dtypes, geometry and storages —
/// without touching a byte of tensor data: listing a 10 GB checkpoint reads only its headers and
/// pickle. Storages are not placed. Throws FormatError, UnsupportedError, IoError.
[[nodiscard]] PTHLOAD_API Checkpoint open(const std::filesystem::path& path,
                                          const LoadOptions& options = {});

/// Reads the checkpoint and places every storage where options.map_location (or, without one,
/// its location tag) says: on the CPU as zero-copy views of the mapped file (or owned copies
/// with options.copy), on CUDA as device memory. Throws as open(), and DeviceError when a
/// storage's device is unavailable (the message names the storage, the tag and map_location).
[[nodiscard]] PTHLOAD_API Checkpoint load(const std::filesystem::path& path,
                                          const LoadOptions& options = {});

}  // namespace pthload
