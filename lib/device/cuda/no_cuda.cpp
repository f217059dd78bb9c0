// A build without CUDA: no device exists, and placing on one is a clear error (device_check).
#include "device/backend.hpp"
#include "pthload/device.hpp"  // cuda_device_count() is public: PTHLOAD_API exports it

namespace pthload::device {

std::shared_ptr<Backend> cuda_backend() {
  return nullptr;
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
