// A build without CUDA: no device exists, and placing on one is a clear error.
#include "device/backend.hpp"
#include "pthload/error.hpp"

namespace pthload::device {

std::unique_ptr<detail::DeviceMemory> copy_to_cuda(std::span<const std::byte>, int) {
  throw DeviceError(Errc::kDeviceCudaUnavailable, "this build of pthload has no CUDA support");
}

bool built_with_cuda() noexcept {
  return false;
}

}  // namespace pthload::device

namespace pthload {

int cuda_device_count() noexcept {
  return 0;
}

}  // namespace pthload
