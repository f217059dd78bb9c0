// Element types of tensors, named and sized as torch names and sizes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "pthload/export.hpp"

namespace pthload {

/// Every dtype torch can save. Names (dtype_name) are torch's without the `torch.` prefix.
enum class Dtype : std::uint8_t {
  kFloat64,
  kFloat32,
  kFloat16,
  kBFloat16,
  kComplex32,
  kComplex64,
  kComplex128,
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kQInt8,
  kQUInt8,
  kQInt32,
  kQUInt4x2,
  kQUInt2x4,
  kFloat8E5M2,
  kFloat8E4M3FN,
  kFloat8E5M2FNUZ,
  kFloat8E4M3FNUZ,
  kFloat8E8M0FNU,
  kFloat4E2M1FNx2,
  kBits8,
  kBits16,
  kBits1x8,
  kBits2x4,
  kBits4x2,
};

/// torch's name: "float32", "bfloat16", "qint8", "float8_e4m3fn". The view is static.
[[nodiscard]] PTHLOAD_API std::string_view dtype_name(Dtype dtype) noexcept;
/// Bytes per element, as torch's element_size() gives it (packed types count one byte).
[[nodiscard]] PTHLOAD_API std::size_t element_size(Dtype dtype) noexcept;
/// The dtype of torch's name ("float32"; also the aliases "float", "half", "long", ...), or
/// nullopt.
[[nodiscard]] PTHLOAD_API std::optional<Dtype> dtype_from_name(std::string_view name) noexcept;
/// Whether the dtype is one of the quantized integer types (qint8, quint8, ...).
[[nodiscard]] PTHLOAD_API bool is_quantized(Dtype dtype) noexcept;
/// How many integers a packed quantized dtype stores per byte (quint4x2: 2, quint2x4: 4; torch
/// keeps ceil(numel / that) bytes for such a tensor); 1 for every other dtype.
[[nodiscard]] PTHLOAD_API std::uint64_t packed_per_byte(Dtype dtype) noexcept;
/// The bytes `numel` integers of a packed dtype take, ceil(numel / packed_per_byte(dtype)),
/// computed without overflow (numel may be 2^64 - 1). For any other dtype, numel itself: a
/// count of elements, which is bytes only for one-byte dtypes.
[[nodiscard]] PTHLOAD_API std::uint64_t packed_nbytes(Dtype dtype, std::uint64_t numel) noexcept;

}  // namespace pthload
