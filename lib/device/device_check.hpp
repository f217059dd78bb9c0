// Checking the devices callers name (map_location's answers, load_slice's and to()'s targets)
// and that a storage's target device exists, before any byte is placed.
#pragma once

#include <string>

#include "checkpoint/state.hpp"
#include "pthload/device.hpp"

namespace pthload::device {

/// Throws for a device no caller can mean (see checked_device); `context` begins the message.
[[noreturn]] void throw_invalid_device(Device device, const std::string& context);

/// `device` as the device layer places onto: a CPU or meta index is dropped, as torch's
/// tensor.to("cpu:5") lands on "cpu". Throws UnsupportedError(kDeviceUnsupportedType) for a type
/// that is not cpu, cuda or meta (an integer cast to Device::Type), and
/// DeviceError(kDeviceOrdinalOutOfRange) for an index below -1, which torch refuses ("Device
/// index must not be negative"). kSkipStorage is such an index: callers that accept it test for
/// it first. `context()` (a callable, so the success path formats nothing) says whose device it
/// is ("Checkpoint::to").
template <typename Context>
[[nodiscard]] Device checked_device(Device device, Context&& context) {
  const bool known_type = device.type == Device::Type::kCpu || device.type == Device::Type::kCuda ||
                          device.type == Device::Type::kMeta;
  if (!known_type || device.index < -1) throw_invalid_device(device, context());
  if (device.type != Device::Type::kCuda) device.index = -1;
  return device;
}

/// Throws DeviceError when `device` is a CUDA device this process does not have: none at all
/// (kDeviceCudaUnavailable) or not that ordinal (kDeviceOrdinalOutOfRange). The message names
/// the storage, its tag, whether map_location chose the device, and map_location as the fix.
void check_device_exists(const internal::StorageState& storage, Device device,
                         bool from_map_location, int cuda_devices);

}  // namespace pthload::device
