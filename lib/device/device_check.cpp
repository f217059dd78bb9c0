// Devices callers name, checked (c10/core/Device.cpp's checks), and whether the device a storage
// is headed for exists, in torch's words (torch/serialization.py _validate_device) with the
// storage named.
#include "device/device_check.hpp"

#include <fmt/format.h>

#include "device/backend.hpp"
#include "pthload/error.hpp"

namespace pthload::device {

void throw_invalid_device(Device device, const std::string& context) {
  const auto type = static_cast<int>(device.type);
  if (device.type != Device::Type::kCpu && device.type != Device::Type::kCuda &&
      device.type != Device::Type::kMeta) {
    // Only a cast integer gets here (a C caller's, or a corrupted value): say which.
    throw UnsupportedError(
        Errc::kDeviceUnsupportedType,
        fmt::format("{}: device type {} is not cpu ({}), cuda ({}) or meta ({})", context, type,
                    static_cast<int>(Device::Type::kCpu), static_cast<int>(Device::Type::kCuda),
                    static_cast<int>(Device::Type::kMeta)));
  }
  throw DeviceError(Errc::kDeviceOrdinalOutOfRange,
                    fmt::format("{}: device index {} is neither an ordinal nor -1 (the current "
                                "device)",
                                context, device.index));
}

void check_device_exists(const internal::StorageState& storage, Device device,
                         bool from_map_location, int cuda_devices) {
  if (device.type != Device::Type::kCuda) return;
  if (cuda_devices > 0 && device.index < cuda_devices) return;
  // Only a storage that fails pays for its words: formatting them for each of 100 000 storages
  // bound for a GPU cost 3.5 times the rest of placing them.
  const std::string origin =
      from_map_location ? fmt::format("map_location sends storage '{}' (tagged '{}') to '{}'",
                                      storage.key, storage.location, device.to_string())
                        : fmt::format("storage '{}' is tagged '{}'", storage.key, storage.location);
  if (cuda_devices == 0) {
    throw DeviceError(Errc::kDeviceCudaUnavailable,
                      fmt::format("{} but {}; pass map_location \"cpu\" to load it onto the "
                                  "CPU",
                                  origin,
                                  device::built_with_cuda() ? "no CUDA device is available"
                                                            : "this build has no CUDA support"));
  }
  if (device.index >= cuda_devices) {
    throw DeviceError(
        Errc::kDeviceOrdinalOutOfRange,
        fmt::format("{} but this machine has {} CUDA device{}; use map_location to "
                    "map it to an existing device (e.g. {{\"{}\": \"cuda:0\"}} or "
                    "\"cpu\")",
                    origin, cuda_devices, cuda_devices == 1 ? "" : "s", storage.location));
  }
}

}  // namespace pthload::device
