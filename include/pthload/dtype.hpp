// Element types of tensors, named and sized as torch names and sizes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "pthload/export.hpp"

namespace pthload {

/// Every dtype torch can save. Names (dtype_name) are torch's without the `torch.` prefix; each
/// enumerator below gives that name, and torch's alias where it has one.
enum class Dtype : std::uint8_t {
  kFloat64,         ///< float64 (torch.double)
  kFloat32,         ///< float32 (torch.float)
  kFloat16,         ///< float16 (torch.half)
  kBFloat16,        ///< bfloat16
  kComplex32,       ///< complex32 (torch.chalf): two float16
  kComplex64,       ///< complex64 (torch.cfloat): two float32
  kComplex128,      ///< complex128 (torch.cdouble): two float64
  kBool,            ///< bool: one byte, 0 or 1
  kInt8,            ///< int8
  kInt16,           ///< int16 (torch.short)
  kInt32,           ///< int32 (torch.int)
  kInt64,           ///< int64 (torch.long)
  kUInt8,           ///< uint8
  kUInt16,          ///< uint16
  kUInt32,          ///< uint32
  kUInt64,          ///< uint64
  kQInt8,           ///< qint8: quantized signed 8-bit integers (see Tensor::quantization())
  kQUInt8,          ///< quint8: quantized unsigned 8-bit integers
  kQInt32,          ///< qint32: quantized signed 32-bit integers
  kQUInt4x2,        ///< quint4x2: quantized unsigned 4-bit integers, two per byte
  kQUInt2x4,        ///< quint2x4: quantized unsigned 2-bit integers, four per byte
  kFloat8E5M2,      ///< float8_e5m2
  kFloat8E4M3FN,    ///< float8_e4m3fn
  kFloat8E5M2FNUZ,  ///< float8_e5m2fnuz
  kFloat8E4M3FNUZ,  ///< float8_e4m3fnuz
  kFloat8E8M0FNU,   ///< float8_e8m0fnu: an exponent only (block scales)
  kFloat4E2M1FNx2,  ///< float4_e2m1fn_x2: two 4-bit floats in one byte, one element
  kBits8,           ///< bits8: 8 bits without numeric meaning
  kBits16,          ///< bits16: 16 bits without numeric meaning
  kBits1x8,         ///< bits1x8: eight 1-bit fields in one byte, one element
  kBits2x4,         ///< bits2x4: four 2-bit fields in one byte, one element
  kBits4x2,         ///< bits4x2: two 4-bit fields in one byte, one element
};

/// torch's name: "float32", "bfloat16", "qint8", "float8_e4m3fn"; "unknown" for a value outside
/// the enum. The view is static: never freed, valid for the life of the program.
[[nodiscard]] PTHLOAD_API std::string_view dtype_name(Dtype dtype) noexcept;
/// Bytes per element, as torch's element_size() gives it (packed types count one byte); 1 for a
/// value outside the enum.
[[nodiscard]] PTHLOAD_API std::size_t element_size(Dtype dtype) noexcept;
/// The dtype of torch's name ("float32"; also the aliases "float", "half", "long", ...), or
/// nullopt for any other text. Matched exactly: no `torch.` prefix, case-sensitive.
[[nodiscard]] PTHLOAD_API std::optional<Dtype> dtype_from_name(std::string_view name) noexcept;
/// Whether the dtype is one of the quantized integer types: qint8, quint8, qint32, quint4x2,
/// quint2x4.
[[nodiscard]] PTHLOAD_API bool is_quantized(Dtype dtype) noexcept;
/// How many integers a packed quantized dtype stores per byte (quint4x2: 2, quint2x4: 4; torch
/// keeps ceil(numel / that) bytes for such a tensor); 1 for every other dtype.
[[nodiscard]] PTHLOAD_API std::uint64_t packed_per_byte(Dtype dtype) noexcept;
/// The bytes `numel` integers of a packed dtype take, ceil(numel / packed_per_byte(dtype)),
/// computed without overflow (numel may be 2^64 - 1). For any other dtype, numel itself: a
/// count of elements, which is bytes only for one-byte dtypes.
[[nodiscard]] PTHLOAD_API std::uint64_t packed_nbytes(Dtype dtype, std::uint64_t numel) noexcept;

}  // namespace pthload
