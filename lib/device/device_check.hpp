// Checking that a storage's target device exists before any byte is placed.
#pragma once

#include "pthload/device.hpp"
#include "torch/state.hpp"

namespace pthload::device {

/// Throws DeviceError when `device` is a CUDA device this process does not have: none at all
/// (kDeviceCudaUnavailable) or not that ordinal (kDeviceOrdinalOutOfRange). The message names
/// the storage, its tag, whether map_location chose the device, and map_location as the fix.
void check_device_exists(const internal::StorageState& storage, Device device,
                         bool from_map_location, int cuda_devices);

}  // namespace pthload::device
