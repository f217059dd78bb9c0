// The CUDA backend: the pipeline's calls as CUDA runtime calls (cudaMallocAsync-free: plain
// cudaMalloc; portable pinned staging in the memory policy's mappings, cudaHostAlloc where that
// fails;
// cudaMemcpyAsync; events without timing).
// The kernels are kernels.cu's when nvcc built them; without nvcc the same work is done on the
// host through a round trip (slow, correct).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "common/fresh_memory.hpp"
#include "device/backend.hpp"
#include "device/cpu/kernels.hpp"
#include "pthload/device.hpp"  // cuda_device_count() is public: PTHLOAD_API exports it
#include "pthload/error.hpp"
#ifdef PTHLOAD_CUDA_KERNELS
#include "device/cuda/kernels.hpp"
#endif

namespace pthload::device {
namespace {

void check(cudaError_t status, Errc code, std::string_view what) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // clears a non-sticky error so later calls start clean
    throw DeviceError(code, fmt::format("{}: {} ({})", what, cudaGetErrorString(status),
                                        static_cast<int>(status)));
  }
}

cudaStream_t as_stream(StreamHandle stream) {
  return static_cast<cudaStream_t>(stream);
}

// A staging buffer of at least kLargeBlockBytes: common::map_fresh's mapping, as the memory
// policy advises it, pinned in place; nullptr when any step fails or `bytes` is smaller (the
// caller then uses cudaHostAlloc). Measured on an H200 machine (a Firecracker VM), with the
// policy's PTHLOAD_HUGE_PAGES=1: cudaHostAlloc pinned 64 MiB in 38.8 ms, this in 10.3 ms.
void* register_staging(std::size_t bytes) {
  if (bytes < common::kLargeBlockBytes) return nullptr;  // a small checkpoint's few small slots
  std::byte* block = nullptr;
  try {
    block = common::map_fresh(bytes);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  if (cudaHostRegister(block, bytes, cudaHostRegisterPortable) != cudaSuccess) {
    cudaGetLastError();
    common::unmap_fresh(block, bytes);
    return nullptr;
  }
  return block;
}

class CudaBackend final : public Backend {
 public:
  int device_count() noexcept override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
  }

  int current_device() noexcept override {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return device;
  }

  void use_device(int device) override {
    check(cudaSetDevice(device), Errc::kDeviceCudaUnavailable,
          fmt::format("cudaSetDevice({})", device));
  }

  void* allocate(int device, std::size_t bytes) override {
    void* pointer = nullptr;
    check(cudaMalloc(&pointer, bytes), Errc::kDeviceAllocationFailed,
          fmt::format("cudaMalloc of {} bytes on cuda:{}", bytes, device));
    return pointer;
  }

  void free(int, void* pointer) noexcept override { cudaFree(pointer); }

  void* allocate_staging(std::size_t bytes) override {
    if (void* pointer = register_staging(bytes)) {
      const std::lock_guard lock(registered_mutex_);
      registered_[pointer] = bytes;
      return pointer;
    }
    void* pointer = nullptr;
    // Portable: one ring may serve copies to any device.
    check(cudaHostAlloc(&pointer, bytes, cudaHostAllocPortable), Errc::kDeviceAllocationFailed,
          fmt::format("cudaHostAlloc of {} pinned bytes", bytes));
    return pointer;
  }

  void free_staging(void* pointer) noexcept override {
    {
      const std::lock_guard lock(registered_mutex_);
      if (const auto found = registered_.find(pointer); found != registered_.end()) {
        cudaHostUnregister(pointer);
        common::unmap_fresh(static_cast<std::byte*>(pointer), found->second);
        registered_.erase(found);
        return;
      }
    }
    cudaFreeHost(pointer);
  }

  StreamHandle create_stream(int device) override {
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), Errc::kDeviceCudaUnavailable,
          fmt::format("cudaStreamCreate on cuda:{}", device));
    return stream;
  }

  void destroy_stream(StreamHandle stream) noexcept override {
    cudaStreamDestroy(as_stream(stream));
  }

  EventHandle create_event(int device) override {
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), Errc::kDeviceCudaUnavailable,
          fmt::format("cudaEventCreate on cuda:{}", device));
    return event;
  }

  void destroy_event(EventHandle event) noexcept override {
    cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }

  void copy_to_device(void* destination, const void* source, std::size_t bytes,
                      StreamHandle stream) override {
    check(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyHostToDevice, as_stream(stream)),
          Errc::kDeviceCopyFailed, "cudaMemcpyAsync to the device");
  }

  void copy_to_host(void* destination, const void* source, std::size_t bytes,
                    StreamHandle stream) override {
    check(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToHost, as_stream(stream)),
          Errc::kDeviceCopyFailed, "cudaMemcpyAsync to the host");
    synchronize(stream);
  }

  void record_event(EventHandle event, StreamHandle stream) override {
    check(cudaEventRecord(static_cast<cudaEvent_t>(event), as_stream(stream)),
          Errc::kDeviceCopyFailed, "cudaEventRecord");
  }

  void wait_event(EventHandle event) override {
    check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), Errc::kDeviceCopyFailed,
          "cudaEventSynchronize");
  }

  void synchronize(StreamHandle stream) override {
    check(cudaStreamSynchronize(as_stream(stream)), Errc::kDeviceCopyFailed,
          "cudaStreamSynchronize");
  }

#ifdef PTHLOAD_CUDA_KERNELS
  void byteswap(void* data, std::size_t bytes, std::size_t unit, StreamHandle stream) override {
    check(cuda::launch_byteswap(data, bytes, unit, as_stream(stream)), Errc::kDeviceCopyFailed,
          "byte swap kernel");
  }

  void convert(const void* source, Dtype from, void* destination, Dtype to, std::size_t count,
               StreamHandle stream) override {
    check(cuda::launch_convert(source, from, destination, to, count, as_stream(stream)),
          Errc::kDeviceCopyFailed, "dtype conversion kernel");
  }

  void make_contiguous(const void* source, const StridedView& view, void* destination,
                       StreamHandle stream) override {
    check(cuda::launch_make_contiguous(source, view, destination, as_stream(stream)),
          Errc::kDeviceCopyFailed, "strided gather kernel");
  }
#else
  // Without nvcc: through the host, with the CPU references.
  void byteswap(void* data, std::size_t bytes, std::size_t unit, StreamHandle stream) override {
    std::vector<std::byte> host(bytes);
    copy_to_host(host.data(), data, bytes, stream);
    cpu::byteswap(host, unit);
    copy_back(data, host, stream);
  }

  void convert(const void* source, Dtype from, void* destination, Dtype to, std::size_t count,
               StreamHandle stream) override {
    std::vector<std::byte> in(count * element_size(from));
    std::vector<std::byte> out(count * element_size(to));
    copy_to_host(in.data(), source, in.size(), stream);
    cpu::convert(in, from, out, to, count);
    copy_back(destination, out, stream);
  }

  void make_contiguous(const void* source, const StridedView& view, void* destination,
                       StreamHandle stream) override {
    std::vector<std::byte> in(cpu::strided_extent(view));
    std::vector<std::byte> out(cpu::element_count(view) * view.element_size);
    copy_to_host(in.data(), source, in.size(), stream);
    cpu::make_contiguous(in.data(), view, out.data());
    copy_back(destination, out, stream);
  }

 private:
  void copy_back(void* destination, const std::vector<std::byte>& host, StreamHandle stream) {
    check(cudaMemcpyAsync(destination, host.data(), host.size(), cudaMemcpyHostToDevice,
                          as_stream(stream)),
          Errc::kDeviceCopyFailed, "cudaMemcpyAsync to the device");
    synchronize(stream);  // `host` dies on return
  }
#endif

 private:
  std::mutex registered_mutex_;
  std::unordered_map<void*, std::size_t> registered_;  // pointer → bytes asked for
};

}  // namespace

std::shared_ptr<Backend> cuda_backend() {
  static const auto backend = std::make_shared<CudaBackend>();
  return backend;
}

bool built_with_cuda() noexcept {
  return true;
}

}  // namespace pthload::device

namespace pthload {

int cuda_device_count() noexcept {
  return device::cuda_backend()->device_count();
}

}  // namespace pthload
