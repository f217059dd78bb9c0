// Dtype, the public value type: names and element sizes (torch/_utils.py _element_size;
// c10/core/ScalarType.h names). Here, below every format layer that names dtypes (safetensors).
#include "pthload/dtype.hpp"

#include <array>
#include <utility>

namespace pthload {
namespace {

struct DtypeFacts {
  Dtype dtype;
  std::string_view name;
  std::size_t element_size;
};

// Indexed by the enum's value; the static_assert below keeps the two in step.
constexpr std::array kDtypes{
    DtypeFacts{Dtype::kFloat64, "float64", 8},
    DtypeFacts{Dtype::kFloat32, "float32", 4},
    DtypeFacts{Dtype::kFloat16, "float16", 2},
    DtypeFacts{Dtype::kBFloat16, "bfloat16", 2},
    DtypeFacts{Dtype::kComplex32, "complex32", 4},
    DtypeFacts{Dtype::kComplex64, "complex64", 8},
    DtypeFacts{Dtype::kComplex128, "complex128", 16},
    DtypeFacts{Dtype::kBool, "bool", 1},
    DtypeFacts{Dtype::kInt8, "int8", 1},
    DtypeFacts{Dtype::kInt16, "int16", 2},
    DtypeFacts{Dtype::kInt32, "int32", 4},
    DtypeFacts{Dtype::kInt64, "int64", 8},
    DtypeFacts{Dtype::kUInt8, "uint8", 1},
    DtypeFacts{Dtype::kUInt16, "uint16", 2},
    DtypeFacts{Dtype::kUInt32, "uint32", 4},
    DtypeFacts{Dtype::kUInt64, "uint64", 8},
    DtypeFacts{Dtype::kQInt8, "qint8", 1},
    DtypeFacts{Dtype::kQUInt8, "quint8", 1},
    DtypeFacts{Dtype::kQInt32, "qint32", 4},
    DtypeFacts{Dtype::kQUInt4x2, "quint4x2", 1},
    DtypeFacts{Dtype::kQUInt2x4, "quint2x4", 1},
    DtypeFacts{Dtype::kFloat8E5M2, "float8_e5m2", 1},
    DtypeFacts{Dtype::kFloat8E4M3FN, "float8_e4m3fn", 1},
    DtypeFacts{Dtype::kFloat8E5M2FNUZ, "float8_e5m2fnuz", 1},
    DtypeFacts{Dtype::kFloat8E4M3FNUZ, "float8_e4m3fnuz", 1},
    DtypeFacts{Dtype::kFloat8E8M0FNU, "float8_e8m0fnu", 1},
    DtypeFacts{Dtype::kFloat4E2M1FNx2, "float4_e2m1fn_x2", 1},
    DtypeFacts{Dtype::kBits8, "bits8", 1},
    DtypeFacts{Dtype::kBits16, "bits16", 2},
    DtypeFacts{Dtype::kBits1x8, "bits1x8", 1},
    DtypeFacts{Dtype::kBits2x4, "bits2x4", 1},
    DtypeFacts{Dtype::kBits4x2, "bits4x2", 1},
};

constexpr bool table_in_enum_order() {
  for (std::size_t i = 0; i < kDtypes.size(); ++i) {
    if (static_cast<std::size_t>(kDtypes[i].dtype) != i) return false;
  }
  return true;
}
static_assert(table_in_enum_order());

// torch's attribute aliases (torch.float is torch.float32, ...): dtype globals may use them.
constexpr std::array<std::pair<std::string_view, Dtype>, 10> kAliases{{
    {"double", Dtype::kFloat64},
    {"float", Dtype::kFloat32},
    {"half", Dtype::kFloat16},
    {"cfloat", Dtype::kComplex64},
    {"cdouble", Dtype::kComplex128},
    {"chalf", Dtype::kComplex32},
    {"short", Dtype::kInt16},
    {"int", Dtype::kInt32},
    {"long", Dtype::kInt64},
    {"complex", Dtype::kComplex64},
}};

}  // namespace

std::string_view dtype_name(Dtype dtype) noexcept {
  const auto index = static_cast<std::size_t>(dtype);
  return index < kDtypes.size() ? kDtypes[index].name : "unknown";
}

std::size_t element_size(Dtype dtype) noexcept {
  const auto index = static_cast<std::size_t>(dtype);
  return index < kDtypes.size() ? kDtypes[index].element_size : 1;
}

std::optional<Dtype> dtype_from_name(std::string_view name) noexcept {
  for (const auto& facts : kDtypes) {
    if (facts.name == name) return facts.dtype;
  }
  for (const auto& [alias, dtype] : kAliases) {
    if (alias == name) return dtype;
  }
  return std::nullopt;
}

bool is_quantized(Dtype dtype) noexcept {
  switch (dtype) {
    case Dtype::kQInt8:
    case Dtype::kQUInt8:
    case Dtype::kQInt32:
    case Dtype::kQUInt4x2:
    case Dtype::kQUInt2x4:
      return true;
    default:
      return false;
  }
}

std::uint64_t packed_per_byte(Dtype dtype) noexcept {
  if (dtype == Dtype::kQUInt4x2) return 2;
  if (dtype == Dtype::kQUInt2x4) return 4;
  return 1;
}

std::uint64_t packed_nbytes(Dtype dtype, std::uint64_t numel) noexcept {
  // Not (numel + per_byte - 1) / per_byte: that wraps to 0 for the largest numels.
  const std::uint64_t per_byte = packed_per_byte(dtype);
  return numel / per_byte + (numel % per_byte != 0 ? 1 : 0);
}

}  // namespace pthload
