// The storage classes persistent ids name (torch/storage.py _dtype_to_storage_type_map).
#pragma once

#include <optional>
#include <string_view>

#include "pickle/value.hpp"
#include "pthload/dtype.hpp"

namespace pthload::torch {

/// The dtype of a storage class named `name` ("FloatStorage" → float32; "UntypedStorage" →
/// uint8). torch.load matches by the class name alone, whatever the module (`torch.cuda
/// FloatStorage` in old files), so this ignores the module too. nullopt for other names.
[[nodiscard]] std::optional<Dtype> storage_type_dtype(std::string_view name) noexcept;

/// Throws FormatError(kTorchBadPersistentId) when the persistent id `id` is text: pickle protocol
/// 0 writes torch's ('storage', ...) tuple as its str() (PERSID), which torch.load refuses too
/// ("saved_id must be a tuple"). Returns for any other value.
void refuse_text_persistent_id(const pickle::Value& id);

}  // namespace pthload::torch
