// Storage class names → dtypes (torch/storage.py _dtype_to_storage_type_map, and the
// TorchScript pickler's `<ScalarType>Storage` names from c10/core/ScalarType.h).
#include "torch/storage_types.hpp"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "pthload/error.hpp"

namespace pthload::torch {
namespace {

constexpr std::array<std::pair<std::string_view, Dtype>, 28> kStorageTypes{{
    {"DoubleStorage", Dtype::kFloat64},
    {"FloatStorage", Dtype::kFloat32},
    {"HalfStorage", Dtype::kFloat16},
    {"BFloat16Storage", Dtype::kBFloat16},
    {"LongStorage", Dtype::kInt64},
    {"IntStorage", Dtype::kInt32},
    {"ShortStorage", Dtype::kInt16},
    {"CharStorage", Dtype::kInt8},
    {"ByteStorage", Dtype::kUInt8},
    {"BoolStorage", Dtype::kBool},
    {"ComplexFloatStorage", Dtype::kComplex64},
    {"ComplexDoubleStorage", Dtype::kComplex128},
    {"ComplexHalfStorage", Dtype::kComplex32},
    {"QInt8Storage", Dtype::kQInt8},
    {"QUInt8Storage", Dtype::kQUInt8},
    {"QInt32Storage", Dtype::kQInt32},
    {"QUInt4x2Storage", Dtype::kQUInt4x2},
    {"QUInt2x4Storage", Dtype::kQUInt2x4},
    {"UntypedStorage", Dtype::kUInt8},
    // The TorchScript pickler spells every ScalarType as <Name>Storage.
    {"Float8_e5m2Storage", Dtype::kFloat8E5M2},
    {"Float8_e4m3fnStorage", Dtype::kFloat8E4M3FN},
    {"Float8_e5m2fnuzStorage", Dtype::kFloat8E5M2FNUZ},
    {"Float8_e4m3fnuzStorage", Dtype::kFloat8E4M3FNUZ},
    {"UInt16Storage", Dtype::kUInt16},
    {"UInt32Storage", Dtype::kUInt32},
    {"UInt64Storage", Dtype::kUInt64},
    {"Bits8Storage", Dtype::kBits8},
    {"Bits16Storage", Dtype::kBits16},
}};

}  // namespace

std::optional<Dtype> storage_type_dtype(std::string_view name) noexcept {
  for (const auto& [storage_name, dtype] : kStorageTypes) {
    if (storage_name == name) return dtype;
  }
  return std::nullopt;
}

void refuse_text_persistent_id(const pickle::Value& id) {
  if (!id.is(pickle::Kind::kString) && !id.is(pickle::Kind::kPython2String)) return;
  throw FormatError(Errc::kTorchBadPersistentId,
                    fmt::format("persistent id is the text '{}', not a tuple: pickle protocol 0 "
                                "writes torch's storage ids as text, which torch.load cannot "
                                "read either (save with pickle_protocol 1 or higher)",
                                id.as_string().substr(0, 60)));
}

}  // namespace pthload::torch
