// The GPU placement pipeline: storages bound for devices, read by several threads into a
// bounded ring of staging buffers and copied asynchronously per device stream, each slot reused
// once the event recorded after its copy has passed. Small storages close together in the file
// share one device allocation laid out like the file (an arena), so one chunk of the file is one
// copy whatever number of storages it holds; large ones are chunked. Runs on any Backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "checkpoint/state.hpp"
#include "device/backend.hpp"
#include "pthload/options.hpp"

namespace pthload::device {

/// One device allocation: the backend's, or the caller's allocator's. Freed (by whichever made
/// it) when the last storage in it goes.
class DeviceBlock {
 public:
  /// Allocates `bytes` (> 0) on `device`, through `allocator` when it has `allocate`. Call on a
  /// thread whose current device is `device`. Throws DeviceError(kDeviceAllocationFailed).
  DeviceBlock(std::shared_ptr<Backend> backend, std::shared_ptr<const DeviceAllocator> allocator,
              int device, std::size_t bytes);
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  ~DeviceBlock();

  [[nodiscard]] std::byte* data() const noexcept { return pointer_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  [[nodiscard]] int device() const noexcept { return device_; }

 private:
  std::shared_ptr<Backend> backend_;
  std::shared_ptr<const DeviceAllocator> allocator_;
  int device_;
  std::size_t bytes_;
  std::byte* pointer_ = nullptr;
};

/// A storage's bytes on a device: all of a block, or its slice of an arena.
class DeviceSlice final : public internal::DeviceMemory {
 public:
  /// An empty storage has no block (a null pointer, as torch gives a storage of 0 bytes).
  DeviceSlice(std::shared_ptr<DeviceBlock> block, std::size_t offset) noexcept
      : block_(std::move(block)), offset_(offset) {}
  [[nodiscard]] const void* pointer() const noexcept override {
    return block_ ? block_->data() + offset_ : nullptr;
  }
  [[nodiscard]] const std::shared_ptr<DeviceBlock>& block() const noexcept { return block_; }

 private:
  std::shared_ptr<DeviceBlock> block_;
  std::size_t offset_;
};

/// Counts bytes placed and tells CudaOptions::progress, one call at a time.
class Progress {
 public:
  Progress(std::function<void(std::uint64_t, std::uint64_t)> callback, std::uint64_t total)
      : callback_(std::move(callback)), total_(total) {}
  void add(std::uint64_t bytes);

 private:
  std::function<void(std::uint64_t, std::uint64_t)> callback_;
  std::uint64_t total_;
  std::uint64_t placed_ = 0;
  std::mutex mutex_;
};

/// A storage bound for a device, as the pipeline sees it.
struct DeviceJob {
  /// Names the storage in errors.
  const internal::StorageState* storage = nullptr;
  int device = 0;
  /// The storage's bytes in host memory, as stored (not yet byte-swapped).
  std::span<const std::byte> source;
  /// The whole file `source` lies in, when it is a view of that file: only such storages share
  /// arenas, whose copies read the file's bytes between storages too. Empty otherwise (an
  /// inflated record, a CPU storage being moved).
  std::span<const std::byte> file;
  /// What reads `source` (and an arena's bytes of `file`) into staging: pread for a mapped
  /// file, so a file that shrinks gives IoError, not SIGBUS. nullptr: plain memory.
  const common::MappedFile* reader = nullptr;
  /// Multi-byte elements to swap on the device in units of this many bytes (1: none).
  std::size_t swap_unit = 1;
  /// The alignment the storage's elements need on the device.
  std::size_t alignment = 1;
};

/// How the jobs were laid out (for tests and pthbench).
struct PipelineReport {
  std::size_t allocations = 0;  ///< device allocations made
  std::size_t arenas = 0;       ///< of which arenas (more than one storage)
  std::size_t copies = 0;       ///< host→device copies issued
  std::size_t staging_bytes = 0;
  unsigned reader_threads = 0;
  /// Where the time went, in milliseconds: device allocations; the readers and their copies,
  /// from the streams' creation until the last reader is done; the byte swaps and the wait for
  /// the last copy. staging_ms is the time pinning the staging buffers took on its own thread,
  /// while the readers already ran.
  double allocate_ms = 0;
  double staging_ms = 0;
  double copy_ms = 0;
  double finish_ms = 0;
};

/// Runs `body` on a new thread and rethrows what it threw: device calls made there leave the
/// calling thread's current device alone.
void run_on_own_thread(const std::function<void()>& body);

/// Throws DeviceError(kDeviceBadOptions) for CUDA options no load onto `devices` distinct GPUs
/// can use: no staging buffer, or a caller's stream or event serving more than one device.
/// place_storages calls it before any byte is placed; place_on_devices again.
void check_cuda_options(const CudaOptions& options, std::size_t devices);

/// Places every job's bytes on its device through `backend`, and returns one DeviceMemory per
/// job, in the jobs' order. All device calls are made on threads the pipeline owns, so the
/// calling thread's current device is untouched. When anything fails, everything this call
/// allocated (device memory, staging buffers, streams, events, threads) is released and the
/// error, naming the storage, the device and the bytes asked for, is thrown.
[[nodiscard]] std::vector<std::unique_ptr<internal::DeviceMemory>> place_on_devices(
    const std::shared_ptr<Backend>& backend, std::span<const DeviceJob> jobs,
    const CudaOptions& options, Progress& progress, PipelineReport* report = nullptr);

}  // namespace pthload::device
