// The storage classes persistent ids name (torch/storage.py _dtype_to_storage_type_map).
#pragma once

#include <optional>
#include <string_view>

#include "pthload/dtype.hpp"

namespace pthload::torch {

/// The dtype of a storage class named `name` ("FloatStorage" → float32; "UntypedStorage" →
/// uint8). torch.load matches by the class name alone, whatever the module (`torch.cuda
/// FloatStorage` in old files), so this ignores the module too. nullopt for other names.
[[nodiscard]] std::optional<Dtype> storage_type_dtype(std::string_view name) noexcept;

}  // namespace pthload::torch
