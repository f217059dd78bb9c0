// Converting placed floating storages to one dtype (LoadOptions::floating_dtype).
#pragma once

#include <memory>

#include "device/backend.hpp"
#include "pthload/checkpoint.hpp"

namespace pthload::device {

/// Throws UnsupportedError(kDeviceBadOptions) when `target` is not a dtype convert_storages
/// converts to (float32, bfloat16, float16, float8_e4m3fn, float8_e5m2).
void check_floating_dtype(Dtype target);

/// Converts every placed floating storage of `checkpoint` that LoadOptions::floating_dtype
/// allows to `target` where it lies (GPU storages through `backend`'s kernel), and retypes the
/// tensors over them. All or nothing: when it throws (UnsupportedError(kDeviceBadOptions) for a
/// target that is not a convertible floating type, DeviceError for the device) nothing changed.
void convert_storages(Checkpoint& checkpoint, Dtype target,
                      const std::shared_ptr<Backend>& backend);

}  // namespace pthload::device
