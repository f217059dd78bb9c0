// The map_location forms torch.load accepts (torch/serialization.py
// _get_restore_location, default_restore_location; docs/format.md §7).
#include <fmt/format.h>

#include "pthload/device.hpp"
#include "pthload/error.hpp"

namespace pthload {

MapLocation map_to(std::string_view device) {
  if (device == "auto") return map_to(auto_device());
  return map_to(Device::parse(device));
}

Device auto_device() noexcept {
  return cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu();
}

MapLocation map_to(Device device) {
  return [device](const StorageInfo&, std::string_view) -> std::optional<Device> { return device; };
}

MapLocation map_dict(std::map<std::string, std::string> tag_to_device) {
  // Parsed once, here, so a bad device string fails before any storage is read.
  std::map<std::string, Device, std::less<>> parsed;
  for (const auto& [tag, device] : tag_to_device)
    parsed.emplace(tag, Device::parse(device));
  return [parsed = std::move(parsed)](const StorageInfo&,
                                      std::string_view location) -> std::optional<Device> {
    if (const auto found = parsed.find(location); found != parsed.end()) return found->second;
    return std::nullopt;
  };
}

MapLocation map_dict(
    std::initializer_list<std::pair<const std::string, std::string>> tag_to_device) {
  return map_dict(std::map<std::string, std::string>(tag_to_device));
}

Device default_device_for(std::string_view location) {
  return Device::parse(location);
}

}  // namespace pthload
