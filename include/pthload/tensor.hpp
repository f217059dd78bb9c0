// Storages (bytes, shared) and tensors (a dtype and a geometry over a storage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pthload/device.hpp"
#include "pthload/dtype.hpp"
#include "pthload/export.hpp"

namespace pthload {

namespace detail {
struct StorageState;
}

/// One storage of a checkpoint: a run of bytes that tensors view. Shared: every tensor that
/// views it holds it, so it lives as long as the last of them (or the Checkpoint). Created by
/// open() (not placed: metadata only) and placed by load(): on CPU as a read-only view into the
/// memory-mapped file or an owned 64-byte aligned buffer; on CUDA as device memory.
class PTHLOAD_API Storage {
 public:
  explicit Storage(std::unique_ptr<detail::StorageState> state) noexcept;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  /// The key in the file ("0"); the record is `<top>/data/<key>`.
  [[nodiscard]] std::string_view key() const noexcept;
  /// The location tag torch saved ("cpu", "cuda:0").
  [[nodiscard]] std::string_view location() const noexcept;
  /// The element type the file declares for the storage (uint8 for an untyped storage).
  [[nodiscard]] Dtype dtype() const noexcept;
  [[nodiscard]] std::uint64_t nbytes() const noexcept;
  /// Whether load() placed the bytes (open() never does).
  [[nodiscard]] bool is_placed() const noexcept;
  /// Where the bytes are; Device::cpu() for a storage that is not placed yet.
  [[nodiscard]] Device device() const noexcept;
  /// Whether the bytes are a zero-copy view of the mapped file (CPU only).
  [[nodiscard]] bool is_file_view() const noexcept;
  /// The bytes, when placed on the CPU; valid while this Storage lives. Throws
  /// DeviceError(kDeviceNotOnCpu) otherwise.
  [[nodiscard]] std::span<const std::byte> bytes() const;
  /// The device address of a CUDA storage (nullptr for others and for empty storages).
  [[nodiscard]] const void* device_pointer() const noexcept;

  /// For the library's own layers: the state behind this storage.
  [[nodiscard]] detail::StorageState& state() noexcept { return *state_; }
  [[nodiscard]] const detail::StorageState& state() const noexcept { return *state_; }

 private:
  std::unique_ptr<detail::StorageState> state_;
};

/// A tensor: dtype, sizes, strides and offset (both in elements) over a shared Storage,
/// exactly as torch rebuilds it. Copyable: copies share the storage.
class PTHLOAD_API Tensor {
 public:
  /// A tensor over `storage`; `sizes` and `strides` must have the same length (copied).
  Tensor(std::shared_ptr<const Storage> storage, Dtype dtype, std::span<const std::int64_t> sizes,
         std::span<const std::int64_t> strides, std::int64_t storage_offset, bool requires_grad);

  [[nodiscard]] Dtype dtype() const noexcept { return dtype_; }
  [[nodiscard]] std::span<const std::int64_t> sizes() const noexcept {
    return std::span(dims_).first(dims_.size() / 2);
  }
  [[nodiscard]] std::span<const std::int64_t> strides() const noexcept {
    return std::span(dims_).subspan(dims_.size() / 2);
  }
  [[nodiscard]] std::int64_t storage_offset() const noexcept { return storage_offset_; }
  [[nodiscard]] bool requires_grad() const noexcept { return requires_grad_; }
  [[nodiscard]] std::size_t dim() const noexcept { return dims_.size() / 2; }
  /// The product of the sizes (1 for a 0-dim tensor).
  [[nodiscard]] std::uint64_t numel() const noexcept;
  /// numel() × element_size(dtype()).
  [[nodiscard]] std::uint64_t nbytes() const noexcept;
  /// Whether the strides are the row-major ones for the sizes (torch's is_contiguous()).
  [[nodiscard]] bool is_contiguous() const noexcept;
  [[nodiscard]] const Storage& storage() const noexcept { return *storage_; }
  [[nodiscard]] const std::shared_ptr<const Storage>& shared_storage() const noexcept {
    return storage_;
  }
  [[nodiscard]] Device device() const noexcept { return storage_->device(); }
  /// The first element's address on the CPU (the storage's bytes from storage_offset on);
  /// valid while the storage lives. Throws DeviceError(kDeviceNotOnCpu) when not on the CPU.
  [[nodiscard]] const std::byte* data() const;
  /// A copy of the elements in row-major order, as one contiguous run of bytes. Throws as
  /// data().
  [[nodiscard]] std::vector<std::byte> contiguous_bytes() const;
  /// XXH3-64 of the elements in row-major order as little-endian bytes — what a view shows,
  /// not its whole storage — without copying them. pthinspect's `--checksum`. Throws as data().
  [[nodiscard]] std::uint64_t content_checksum() const;

 private:
  std::shared_ptr<const Storage> storage_;
  Dtype dtype_;
  std::vector<std::int64_t> dims_;  // the sizes, then the strides: one allocation per tensor
  std::int64_t storage_offset_;
  bool requires_grad_;
};

/// A tensor and its path from the checkpoint's root ("layers.0.weight").
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

}  // namespace pthload
