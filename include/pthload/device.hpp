// Devices, and map_location: where each storage of a checkpoint goes.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "pthload/dtype.hpp"
#include "pthload/export.hpp"

namespace pthload {

/// A place for a storage's bytes.
struct PTHLOAD_API Device {
  enum class Type : std::uint8_t { kCpu, kCuda, kMeta };
  Type type = Type::kCpu;
  /// The CUDA ordinal; -1 means "the current device" (torch's `cuda` without an index).
  int index = -1;

  [[nodiscard]] static constexpr Device cpu() noexcept { return {Type::kCpu, -1}; }
  [[nodiscard]] static constexpr Device cuda(int index = -1) noexcept {
    return {Type::kCuda, index};
  }
  [[nodiscard]] static constexpr Device meta() noexcept { return {Type::kMeta, -1}; }
  /// Parses torch's device strings: "cpu", "cuda", "cuda:1", "meta" (a CPU or meta index is
  /// dropped: "cpu:0" is "cpu"). Throws UnsupportedError(kDeviceUnsupportedType) for other device
  /// types ("mps", "xla:0") and FormatError(kDeviceBadString) for text that is no device string,
  /// an index with a sign or a leading zero ("cuda:01") included, as torch.device refuses it.
  [[nodiscard]] static Device parse(std::string_view text);

  /// "cpu", "cuda", "cuda:1", "meta".
  [[nodiscard]] std::string to_string() const;
  friend constexpr bool operator==(const Device&, const Device&) = default;
};

/// What map_location learns about one storage before it is placed.
struct StorageInfo {
  std::string_view key;       ///< the storage's key in the file ("0", "94823749823488")
  std::string_view location;  ///< the tag torch saved ("cpu", "cuda:1")
  Dtype dtype;                ///< the storage's element type (uint8 for an untyped storage)
  std::uint64_t numel;        ///< elements in the storage
  std::uint64_t nbytes;       ///< bytes in the storage
};

/// What a map_location returns to leave a storage out of a load (pthload's addition to
/// torch's map_location): the storage is not read or placed, and it and every tensor viewing it
/// are left out of Checkpoint::storages() and tensors(). A sentinel, not a device: it is only
/// meaningful as map_location's answer.
inline constexpr Device kSkipStorage{Device::Type::kMeta, -2};

/// Picks the device of each storage, as torch.load's map_location does. Called once per
/// storage (not per tensor). Returning nullopt restores the storage where its tag says;
/// returning kSkipStorage leaves it (and its tensors) out. Any other answer is checked before a
/// byte is placed: a Device::Type outside the enum throws UnsupportedError
/// (kDeviceUnsupportedType), an index below -1 DeviceError(kDeviceOrdinalOutOfRange); a CPU or
/// meta index is dropped (torch's t.to("cpu:5") is on "cpu").
using MapLocation =
    std::function<std::optional<Device>(const StorageInfo& storage, std::string_view location)>;

/// Every storage goes to `device` ("cpu", "cuda:0", "meta"; "auto": auto_device()), whatever
/// its tag. Parses the string now: throws as Device::parse.
[[nodiscard]] PTHLOAD_API MapLocation map_to(std::string_view device);
[[nodiscard]] PTHLOAD_API MapLocation map_to(Device device);
/// Renames tags: a storage whose tag is a key (matched exactly, as torch does: "cuda" does
/// not match "cuda:0") goes to the mapped device; others go where their tag says.
[[nodiscard]] PTHLOAD_API MapLocation map_dict(std::map<std::string, std::string> tag_to_device);
[[nodiscard]] PTHLOAD_API MapLocation
map_dict(std::initializer_list<std::pair<const std::string, std::string>> tag_to_device);

/// The device a location tag names when nothing remaps it: "cpu" → CPU, "cuda:1" → CUDA 1,
/// "meta" → meta. Throws UnsupportedError(kDeviceUnsupportedType) for tags pthload cannot
/// place (mps, xla, hpu, ...), naming map_location as the way out.
[[nodiscard]] PTHLOAD_API Device default_device_for(std::string_view location);

/// The first GPU when there is one, else the CPU: what users write as
/// `'cuda' if torch.cuda.is_available() else 'cpu'` (map_to("auto")).
[[nodiscard]] PTHLOAD_API Device auto_device() noexcept;

/// CUDA devices this process can use: 0 without CUDA support in this build, without a
/// driver, or without a GPU.
[[nodiscard]] PTHLOAD_API int cuda_device_count() noexcept;

}  // namespace pthload
