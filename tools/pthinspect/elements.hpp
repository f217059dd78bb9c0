// Reading a CPU tensor's elements in row-major order, a bounded chunk at a time: what export,
// stat, diff and verify stream through, so a 1 GB tensor never needs 1 GB of memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <pthload/pthload.hpp>

namespace pthinspect {

/// The bytes per chunk the readers hand out (and the most a strided view is gathered into).
inline constexpr std::size_t kChunkBytes = std::size_t{4} << 20;

/// The row-major bytes of one tensor placed on the CPU, a chunk at a time. When the storage is a
/// view of the mapped file, its bytes are read with pread (Storage::read), never through the
/// mapping: a file truncated since the load gives IoError rather than SIGBUS, and reading a whole
/// checkpoint keeps no more of it resident than one chunk — a strided view excepted, which is
/// read once into a copy of the bytes it spans. Owned storages' contiguous chunks are views;
/// strided views are gathered into an owned buffer of at most kChunkBytes. Packed dtypes
/// (quint4x2, quint2x4) must be contiguous.
class ElementReader {
 public:
  /// `tensor` must have a storage placed on the CPU (pthload::load with map_to("cpu")); the
  /// tensor is copied and keeps its storage alive. `name` names it in errors. A view that
  /// overlaps itself (stride 0, expand) and shows more than pthload's default
  /// Limits::max_overlapping_view_bytes (pthinspect sets no other) is refused, as
  /// Tensor::content_checksum() refuses it: a tiny file must not make a command run for hours.
  /// Throws FormatError(kTorchLimitExceeded).
  explicit ElementReader(const pthload::Tensor& tensor, std::string_view name = {});
  ElementReader(const ElementReader&) = delete;
  ElementReader& operator=(const ElementReader&) = delete;
  ~ElementReader();

  /// Every byte the tensor shows (numel × element size, packed bytes for packed dtypes).
  [[nodiscard]] std::uint64_t total_bytes() const noexcept { return total_; }
  /// The next at most `max_bytes` bytes (a whole number of elements, at least one element),
  /// or an empty span at the end. Valid until the next call. Chunks of a strided view may be
  /// shorter than asked (a box of its index space), so callers reading two tensors in step
  /// must not assume equal chunks.
  [[nodiscard]] std::span<const std::byte> next(std::size_t max_bytes = kChunkBytes);

 private:
  std::span<const std::byte> next_box(std::uint64_t elements_wanted);
  [[nodiscard]] std::uint64_t first_byte() const noexcept;  // of the tensor in its storage

  pthload::Tensor tensor_;
  std::size_t element_size_;
  std::uint64_t total_ = 0;
  std::uint64_t done_ = 0;  // bytes handed out
  bool contiguous_;
  bool file_view_;
  std::vector<std::int64_t> index_;  // the strided walk's position, row-major
  std::vector<std::byte> buffer_;
  std::vector<std::byte> spanned_;  // a strided file view's bytes, read once with pread
};

/// Tensor::content_checksum() of each of `tensors`, read together (pthload::content_checksums:
/// the small views of a file in a few preads, the large ones through one window). Where that
/// fails, each is asked in turn, so that the error names the first tensor whose read fails
/// (`names[i]`; `path` where the error names no file). `names` is as long as `tensors`.
[[nodiscard]] std::vector<std::uint64_t> content_checksums_naming(
    std::span<const pthload::Tensor* const> tensors, std::span<const std::string_view> names,
    const std::string& path);

/// Why a tensor has no bytes to read on the CPU ("sparse tensor", "meta tensor", ...), or empty
/// when ElementReader can read it.
[[nodiscard]] std::string unreadable_reason(const pthload::Tensor& tensor);

}  // namespace pthinspect
