// The host backend: the pipeline's device calls done on the CPU (plain memory, memcpy, one
// worker thread per stream, events as counters), so that the whole GPU pipeline runs in CI.
// Faults can be injected (out of memory at the k-th allocation, a failing copy) and every
// resource is counted, so tests can check that a failed load leaks nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "device/backend.hpp"

namespace pthload::device {

/// What a HostBackend pretends and which of its calls fail.
struct HostBackendSettings {
  /// Devices it offers.
  int devices = 1;
  /// The allocate() call (counted from 0, device memory only) that fails as out of memory;
  /// -1: none.
  int fail_allocation_at = -1;
  /// The copy_to_device() call (counted from 0) that fails; -1: none.
  int fail_copy_at = -1;
  /// The allocate_staging() call (counted from 0) that fails; -1: none.
  int fail_staging_at = -1;
  /// Each copy sleeps this long on its stream's thread first: makes a missing wait on an
  /// event (a staging slot reused too early) corrupt the result instead of going unseen.
  std::chrono::microseconds copy_delay{0};
};

/// The host implementation of Backend. Thread-safe as the CUDA runtime is.
class HostBackend final : public Backend {
 public:
  explicit HostBackend(HostBackendSettings settings = {});
  ~HostBackend() override;
  HostBackend(const HostBackend&) = delete;
  HostBackend& operator=(const HostBackend&) = delete;

  [[nodiscard]] int device_count() noexcept override;
  [[nodiscard]] int current_device() noexcept override { return 0; }
  void use_device(int device) override;
  [[nodiscard]] void* allocate(int device, std::size_t bytes) override;
  void free(int device, void* pointer) noexcept override;
  [[nodiscard]] void* allocate_staging(std::size_t bytes) override;
  void free_staging(void* pointer) noexcept override;
  [[nodiscard]] StreamHandle create_stream(int device) override;
  void destroy_stream(StreamHandle stream) noexcept override;
  [[nodiscard]] EventHandle create_event(int device) override;
  void destroy_event(EventHandle event) noexcept override;
  void copy_to_device(void* destination, const void* source, std::size_t bytes,
                      StreamHandle stream) override;
  void copy_to_host(void* destination, const void* source, std::size_t bytes,
                    StreamHandle stream) override;
  void record_event(EventHandle event, StreamHandle stream) override;
  void wait_event(EventHandle event) override;
  void synchronize(StreamHandle stream) override;
  void byteswap(void* data, std::size_t bytes, std::size_t unit, StreamHandle stream) override;
  void convert(const void* source, Dtype from, void* destination, Dtype to, std::size_t count,
               StreamHandle stream) override;
  void make_contiguous(const void* source, const StridedView& view, void* destination,
                       StreamHandle stream) override;

  /// What is alive now, and the most staging bytes alive at once.
  struct Counts {
    std::size_t device_allocations = 0;
    std::size_t device_bytes = 0;
    std::size_t staging_allocations = 0;
    std::size_t staging_bytes = 0;
    std::size_t peak_staging_bytes = 0;
    std::size_t streams = 0;
    std::size_t events = 0;
    /// Calls made so far.
    std::size_t allocate_calls = 0;
    std::size_t copy_calls = 0;
  };
  [[nodiscard]] Counts counts() const;
  /// Whether use_device() was ever called on thread `id` (the pipeline must not change the
  /// caller's current device).
  [[nodiscard]] bool used_device_on(std::thread::id id) const;
  /// The device of the allocation made by allocate() that holds `pointer`, or -1.
  [[nodiscard]] int device_of(const void* pointer) const;

  /// What a StreamHandle and an EventHandle point to (host_backend.cpp).
  struct Stream;
  struct Event;

 private:
  // Checks that [pointer, pointer + bytes) lies inside one live device allocation: a pipeline
  // bug writing past an arena shows as a failed test, not as silent corruption.
  void check_device_range(const void* pointer, std::size_t bytes) const;

  HostBackendSettings settings_;
  mutable std::mutex mutex_;
  std::map<const std::byte*, std::pair<std::size_t, int>> allocations_;  // size, device
  std::map<const void*, std::size_t> staging_;
  Counts counts_;
  std::set<std::thread::id> device_threads_;
  std::size_t staging_calls_ = 0;
};

}  // namespace pthload::device
