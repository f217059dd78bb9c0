// Device strings as torch writes them in location tags and accepts them in map_location
// (c10/core/Device.cpp). In the torch layer because storages report their device.
#include <fmt/format.h>

#include <charconv>

#include "pthload/device.hpp"
#include "pthload/error.hpp"

namespace pthload {

Device Device::parse(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view type = text.substr(0, colon);
  int index = -1;
  if (colon != std::string_view::npos) {
    const std::string_view digits = text.substr(colon + 1);
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    // torch's index is `0|[1-9][0-9]*`: it refuses "cuda:01" and "cuda:-0", which from_chars
    // reads as 1 and 0.
    const bool canonical = !digits.empty() && digits[0] >= '0' && digits[0] <= '9' &&
                           (digits[0] != '0' || digits.size() == 1);
    if (!canonical || error != std::errc() || end != digits.data() + digits.size() || index < 0) {
      throw FormatError(Errc::kDeviceBadString,
                        fmt::format("'{}' is not a device: the index must be a non-negative "
                                    "integer without leading zeros",
                                    text));
    }
  }
  if (type == "cpu") return Device::cpu();
  if (type == "cuda") return Device::cuda(index);
  if (type == "meta") return Device::meta();
  if (type.empty() ||
      type.find_first_not_of("abcdefghijklmnopqrstuvwxyz_0123456789") != std::string_view::npos) {
    throw FormatError(Errc::kDeviceBadString, fmt::format("'{}' is not a device string", text));
  }
  throw UnsupportedError(Errc::kDeviceUnsupportedType,
                         fmt::format("device '{}': pthload places storages on cpu, cuda or meta; "
                                     "use map_location to choose one of those",
                                     text));
}

std::string Device::to_string() const {
  switch (type) {
    case Type::kCpu:
      return "cpu";
    case Type::kMeta:
      return "meta";
    case Type::kCuda:
      return index < 0 ? std::string("cuda") : fmt::format("cuda:{}", index);
  }
  return "unknown";
}

}  // namespace pthload
