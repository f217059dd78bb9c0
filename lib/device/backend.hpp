// The narrow interface the GPU placement pipeline drives: allocate, free, copy asynchronously,
// record and wait for events, launch the conversion kernels. Two implementations: CUDA
// (lib/device/cuda/, only with -Dcuda) and the host one (host_backend.hpp), which runs the same
// pipeline on the CPU in CI and can be told to fail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "pthload/dtype.hpp"

namespace pthload::device {

/// A backend's stream (cudaStream_t for CUDA): work on one stream runs in submission order.
using StreamHandle = void*;
/// A backend's event (cudaEvent_t for CUDA): a point on a stream the host can wait for.
using EventHandle = void*;

/// At most this many dimensions in a strided gather (torch allows 64; a launch passes them by
/// value, so the kernel's parameter block bounds it).
inline constexpr std::size_t kMaxGatherDims = 16;

/// A strided view to make contiguous: element `i` of the output (row-major over `sizes`) is the
/// element at `offset + sum(index_d * strides[d])` of the source, all counted in elements.
struct StridedView {
  std::size_t element_size = 1;
  std::size_t dims = 0;
  std::int64_t sizes[kMaxGatherDims] = {};
  std::int64_t strides[kMaxGatherDims] = {};
  std::int64_t offset = 0;
};

/// What the pipeline asks of a device. Every call that can fail throws DeviceError with the
/// backend's own message; the *_free / destroy_* calls never throw. Device calls made on one
/// thread apply to the device passed to the last use_device() on that thread.
class Backend {
 public:
  virtual ~Backend() = default;

  /// Devices this backend can place on (0: none).
  [[nodiscard]] virtual int device_count() noexcept = 0;
  /// The calling thread's current device (what torch's bare "cuda" means); never creates a
  /// context.
  [[nodiscard]] virtual int current_device() noexcept = 0;
  /// Makes `device` this thread's current device. The pipeline calls it only on threads it
  /// owns, so the caller's current device is never changed.
  virtual void use_device(int device) = 0;

  /// `bytes` (> 0) of device memory on `device`, aligned to at least 256 bytes. Throws
  /// DeviceError(kDeviceAllocationFailed).
  [[nodiscard]] virtual void* allocate(int device, std::size_t bytes) = 0;
  virtual void free(int device, void* pointer) noexcept = 0;
  /// `bytes` of host memory the device copies from at full speed (pinned for CUDA).
  [[nodiscard]] virtual void* allocate_staging(std::size_t bytes) = 0;
  virtual void free_staging(void* pointer) noexcept = 0;

  [[nodiscard]] virtual StreamHandle create_stream(int device) = 0;
  virtual void destroy_stream(StreamHandle stream) noexcept = 0;
  [[nodiscard]] virtual EventHandle create_event(int device) = 0;
  virtual void destroy_event(EventHandle event) noexcept = 0;

  /// Enqueues a host→device copy on `stream`; `source` must stay valid until an event recorded
  /// after it completes. Throws DeviceError(kDeviceCopyFailed).
  virtual void copy_to_device(void* destination, const void* source, std::size_t bytes,
                              StreamHandle stream) = 0;
  /// Copies device memory to host memory and returns when the bytes are there.
  virtual void copy_to_host(void* destination, const void* source, std::size_t bytes,
                            StreamHandle stream) = 0;
  virtual void record_event(EventHandle event, StreamHandle stream) = 0;
  /// Blocks the calling thread until the work before the event's last record has finished.
  virtual void wait_event(EventHandle event) = 0;
  /// Blocks until everything enqueued on `stream` has finished; reports a failure of that work.
  virtual void synchronize(StreamHandle stream) = 0;

  /// Enqueues a byte swap of every `unit`-byte element of `bytes` device bytes at `data`.
  virtual void byteswap(void* data, std::size_t bytes, std::size_t unit, StreamHandle stream) = 0;
  /// Enqueues a conversion of `count` elements from `from` to `to` (floating types of
  /// cpu/kernels.hpp's is_convertible), rounding as torch's .to() does. Both are device memory.
  virtual void convert(const void* source, Dtype from, void* destination, Dtype to,
                       std::size_t count, StreamHandle stream) = 0;
  /// Enqueues the gather of `view` from `source` into contiguous `destination`.
  virtual void make_contiguous(const void* source, const StridedView& view, void* destination,
                               StreamHandle stream) = 0;
};

/// The backend load() uses for CUDA devices: the CUDA runtime in a build with CUDA, else
/// nullptr (such a build has no CUDA device: cuda_device_count() is 0).
[[nodiscard]] std::shared_ptr<Backend> cuda_backend();

/// Whether this build was made with CUDA support.
[[nodiscard]] bool built_with_cuda() noexcept;

}  // namespace pthload::device
