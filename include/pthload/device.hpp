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

/// A place for a storage's bytes. A plain value: copy and compare it freely.
struct PTHLOAD_API Device {
  /// The kinds of device pthload places storages on.
  enum class Type : std::uint8_t {
    kCpu,   ///< host memory
    kCuda,  ///< the memory of an NVIDIA GPU
    kMeta   ///< no memory at all: a storage there has a size and no bytes (torch's "meta")
  };
  Type type = Type::kCpu;  ///< the kind of device
  /// The CUDA ordinal; -1 means "the current device" (torch's `cuda` without an index).
  int index = -1;

  /// The CPU (index -1).
  [[nodiscard]] static constexpr Device cpu() noexcept { return {Type::kCpu, -1}; }
  /// CUDA device `index`; the default -1 is the current device, as torch's bare "cuda". The
  /// index is not checked here: a GPU that does not exist is refused when something is placed.
  [[nodiscard]] static constexpr Device cuda(int index = -1) noexcept {
    return {Type::kCuda, index};
  }
  /// The meta device (index -1): sizes without bytes.
  [[nodiscard]] static constexpr Device meta() noexcept { return {Type::kMeta, -1}; }
  /// Parses torch's device strings: "cpu", "cuda", "cuda:1", "meta" (a CPU or meta index is
  /// dropped: "cpu:0" is "cpu"). Returns the device by value. Throws
  /// UnsupportedError(kDeviceUnsupportedType) for other device types ("mps", "xla:0"), naming
  /// map_location as the way out, and FormatError(kDeviceBadString) for text that is no device
  /// string (empty, upper case, a bad index), an index with a sign or a leading zero ("cuda:01")
  /// included, as torch.device refuses it (and std::bad_alloc).
  [[nodiscard]] static Device parse(std::string_view text);

  /// "cpu", "cuda", "cuda:1", "meta", in the form parse() reads (a CPU or meta index is not
  /// shown, so kSkipStorage reads "meta"; "unknown" for a type outside the enum). Returned by
  /// value. Throws only std::bad_alloc.
  [[nodiscard]] std::string to_string() const;
  /// Same type and same index. Device::cuda() (-1) and Device::cuda(0) differ, even where 0 is
  /// the current device.
  friend constexpr bool operator==(const Device&, const Device&) = default;
};

/// What map_location learns about one storage before it is placed. The views are borrowed:
/// valid during the map_location call only (copy what must outlive it).
struct StorageInfo {
  /// The storage's key in the file ("0", "94823749823488"); a safetensors tensor's name, and a
  /// DCP tensor's name where it was assembled from chunks (one saved whole keeps its item's
  /// key); empty for a wrapper-subclass tensor, which has no storage (see MapLocation).
  std::string_view key;
  /// The tag torch saved ("cpu", "cuda:1"); "cpu" for safetensors and DCP files.
  std::string_view location;
  Dtype dtype;           ///< the storage's element type (uint8 for an untyped storage)
  std::uint64_t numel;   ///< elements in the storage
  std::uint64_t nbytes;  ///< bytes in the storage (0 for a wrapper-subclass tensor)
};

/// What a map_location returns to leave a storage out of a load (pthload's addition to
/// torch's map_location): the storage is not read or placed, and it and every tensor viewing it
/// are left out of Checkpoint::storages() and tensors(). A sentinel, not a device: it is only
/// meaningful as map_location's answer.
inline constexpr Device kSkipStorage{Device::Type::kMeta, -2};

/// Picks the device of each storage, as torch.load's map_location does. load() calls it on the
/// thread that called load(), once per storage (not per tensor), with the storage and its tag
/// (`location`, the same text as storage.location); open() never calls it. It is also asked once
/// for each tensor of a wrapper subclass, which has no storage (StorageInfo::key empty, nbytes 0);
/// a numpy array's bytes stay on the CPU without a call, as torch.load leaves them. Returning
/// nullopt restores the storage where its tag says (default_device_for; a tag pthload cannot place
/// makes load() throw UnsupportedError); returning kSkipStorage leaves it (and its tensors) out.
/// Any other answer is checked before a byte is placed: a Device::Type outside the enum throws
/// UnsupportedError (kDeviceUnsupportedType), an index below -1 DeviceError
/// (kDeviceOrdinalOutOfRange); a CPU or meta index is dropped (torch's t.to("cpu:5") is on "cpu");
/// a CUDA device this machine lacks throws DeviceError (kDeviceCudaUnavailable,
/// kDeviceOrdinalOutOfRange). What the callable throws, load() throws.
using MapLocation =
    std::function<std::optional<Device>(const StorageInfo& storage, std::string_view location)>;

/// Every storage goes to `device` ("cpu", "cuda:0", "meta"; "auto": auto_device()), whatever
/// its tag. Parses the string now ("auto" is decided now, not per storage): throws as
/// Device::parse. Returns a callable the caller owns; it keeps no reference to `device`.
[[nodiscard]] PTHLOAD_API MapLocation map_to(std::string_view device);
/// Every storage goes to `device`, whatever its tag. `device` is not checked here but by load(),
/// as any map_location answer is; kSkipStorage leaves every storage out. Returns a callable the
/// caller owns. Throws only std::bad_alloc.
[[nodiscard]] PTHLOAD_API MapLocation map_to(Device device);
/// Renames tags: a storage whose tag is a key (matched exactly, as torch does: "cuda" does
/// not match "cuda:0") goes to the mapped device; others go where their tag says. The values are
/// device strings, parsed now, so a bad one fails before any storage is read: throws as
/// Device::parse ("auto" is not a device string here). Returns a callable the caller owns,
/// holding its own copy of the map.
[[nodiscard]] PTHLOAD_API MapLocation map_dict(std::map<std::string, std::string> tag_to_device);
/// map_dict() of a braced list: `map_dict({{"cuda:1", "cuda:0"}})`. Throws as the map form.
[[nodiscard]] PTHLOAD_API MapLocation
map_dict(std::initializer_list<std::pair<const std::string, std::string>> tag_to_device);

/// The device a location tag names when nothing remaps it: "cpu" → CPU, "cuda:1" → CUDA 1,
/// "cuda" → the current CUDA device (index -1), "meta" → meta; returned by value. Reads the tag
/// as Device::parse does: throws UnsupportedError(kDeviceUnsupportedType) for tags pthload
/// cannot place (mps, xla, hpu, ...), naming map_location as the way out, and
/// FormatError(kDeviceBadString) for a tag that is no device string. Whether that GPU exists is
/// not checked here.
[[nodiscard]] PTHLOAD_API Device default_device_for(std::string_view location);

/// The first GPU (Device::cuda(0)) when there is one, else the CPU: what users write as
/// `'cuda' if torch.cuda.is_available() else 'cpu'` (map_to("auto")).
[[nodiscard]] PTHLOAD_API Device auto_device() noexcept;

/// CUDA devices this process can use (the valid ordinals are 0 to the count - 1): 0 without
/// CUDA support in this build, without a driver, or without a GPU.
[[nodiscard]] PTHLOAD_API int cuda_device_count() noexcept;

}  // namespace pthload
