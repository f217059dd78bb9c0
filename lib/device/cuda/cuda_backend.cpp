// The CUDA backend: cudaMalloc and a synchronous copy per storage (CUDA runtime API).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "device/backend.hpp"
#include "pthload/error.hpp"

namespace pthload::device {
namespace {

class CudaMemory final : public detail::DeviceMemory {
 public:
  explicit CudaMemory(void* pointer) noexcept : pointer_(pointer) {}
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  ~CudaMemory() override {
    if (pointer_ != nullptr) cudaFree(pointer_);
  }
  [[nodiscard]] const void* pointer() const noexcept override { return pointer_; }

 private:
  void* pointer_;
};

void check(cudaError_t status, Errc code, std::string_view what) {
  if (status != cudaSuccess) {
    throw DeviceError(code, fmt::format("{}: {} ({})", what, cudaGetErrorString(status),
                                        static_cast<int>(status)));
  }
}

}  // namespace

std::unique_ptr<detail::DeviceMemory> copy_to_cuda(std::span<const std::byte> bytes, int index) {
  if (index >= 0) check(cudaSetDevice(index), Errc::kDeviceCudaUnavailable, "cudaSetDevice");
  void* pointer = nullptr;
  if (!bytes.empty()) {
    check(cudaMalloc(&pointer, bytes.size()), Errc::kDeviceAllocationFailed,
          fmt::format("cudaMalloc of {} bytes", bytes.size()));
  }
  auto memory = std::make_unique<CudaMemory>(pointer);
  if (!bytes.empty()) {
    check(cudaMemcpy(pointer, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
          Errc::kDeviceCopyFailed, "cudaMemcpy to the device");
  }
  return memory;
}

bool built_with_cuda() noexcept {
  return true;
}

}  // namespace pthload::device

namespace pthload {

int cuda_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clears the sticky error so later calls start clean
    return 0;
  }
  return count;
}

}  // namespace pthload
