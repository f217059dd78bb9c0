// The safetensors file: an 8-byte little-endian header size, a JSON header naming each tensor's
// dtype, shape and byte range, then the tensors' bytes packed one after another
// (huggingface/safetensors safetensors/src/tensor.rs: SafeTensors::read_metadata, validate).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pthload/dtype.hpp"

namespace pthload::safetensors {

/// The largest JSON header accepted: safetensors' own MAX_HEADER_SIZE (100 MB).
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
/// How deeply the header's JSON may nest: the root, a tensor's object and its shape make 3.
inline constexpr int kMaxHeaderNesting = 3;

/// One tensor as the header describes it, checked against the file.
struct TensorEntry {
  std::string name;
  /// The dtype string of the file ("F32", "BF16", "F8_E4M3").
  std::string file_dtype;
  /// torch's dtype for it (F4: float4_e2m1fn_x2, two values per byte).
  Dtype dtype = Dtype::kUInt8;
  /// torch's shape: the header's, except that F4's last dimension counts bytes (pairs), as
  /// safetensors.torch gives float4_e2m1fn_x2 tensors.
  std::vector<std::int64_t> shape;
  /// Where the bytes are in the file (absolute: past the 8 size bytes and the header).
  std::uint64_t offset = 0;
  std::uint64_t nbytes = 0;
};

/// A parsed and validated safetensors header. Owns its strings; borrows nothing.
class Header {
 public:
  /// Parses the header of the whole file `file` and checks it in one pass, as strictly as the
  /// zip reader: the size field (at least 2, at most kMaxHeaderBytes, inside the file), UTF-8
  /// JSON whose root is an object (no duplicate keys, nesting at most kMaxHeaderNesting),
  /// `__metadata__` a string-to-string object, every other member a tensor with exactly a known
  /// dtype, a shape of non-negative integers and data_offsets [begin, end]; end - begin equal to
  /// the shape's bytes (no overflow); the ranges, sorted, cover the data section exactly — no
  /// overlap, no hole, no byte after the last. Throws FormatError (kSafetensors* codes, with
  /// the file offset where one is known) and UnsupportedError (kSafetensorsUnsupportedDtype: a
  /// dtype torch has no type for).
  [[nodiscard]] static Header parse(std::span<const std::byte> file);

  /// The tensors in the order of their bytes in the file (tensors with equal ranges — empty
  /// ones — by name).
  [[nodiscard]] const std::vector<TensorEntry>& tensors() const noexcept { return tensors_; }
  /// `__metadata__`'s entries, sorted by key; empty when the header has none.
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& metadata() const noexcept {
    return metadata_;
  }
  /// The JSON header's size in bytes, as the first 8 bytes give it.
  [[nodiscard]] std::uint64_t header_size() const noexcept { return header_size_; }
  /// Where the data section starts: 8 + header_size().
  [[nodiscard]] std::uint64_t data_offset() const noexcept { return header_size_ + 8; }

 private:
  std::vector<TensorEntry> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::uint64_t header_size_ = 0;
};

/// Whether `file` begins like a safetensors file: 8 size bytes, then `{` and the first byte of
/// a JSON member or the closing brace (whitespace allowed between). Cheap; parse() decides.
[[nodiscard]] bool looks_like_safetensors(std::span<const std::byte> file) noexcept;

}  // namespace pthload::safetensors
