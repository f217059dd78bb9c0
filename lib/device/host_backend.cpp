// The host backend (see host_backend.hpp): a stream is a worker thread running its queue in
// order, an event a pair of counters (recorded, reached), device memory plain aligned memory.
#include "device/host_backend.hpp"

#include <fmt/format.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>

#include "common/assert.hpp"
#include "device/cpu/kernels.hpp"
#include "pthload/error.hpp"

namespace pthload::device {

struct HostBackend::Stream {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> queue;
  std::size_t submitted = 0;
  std::size_t finished = 0;
  bool stopping = false;
  std::thread worker;

  Stream() : worker([this] { run(); }) {}
  ~Stream() {
    {
      const std::lock_guard lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    worker.join();
  }

  void enqueue(std::function<void()> work) {
    {
      const std::lock_guard lock(mutex);
      queue.push_back(std::move(work));
      ++submitted;
    }
    changed.notify_all();
  }

  void drain() {
    std::unique_lock lock(mutex);
    const std::size_t target = submitted;
    changed.wait(lock, [&] { return finished >= target; });
  }

 private:
  void run() {
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, and nothing left to do
      auto work = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      work();
      lock.lock();
      ++finished;
      changed.notify_all();
    }
  }
};

struct HostBackend::Event {
  std::mutex mutex;
  std::condition_variable reached_changed;
  std::size_t recorded = 0;
  std::size_t reached = 0;
};

namespace {

HostBackend::Stream* as_stream(StreamHandle stream) {
  return static_cast<HostBackend::Stream*>(stream);
}

}  // namespace

HostBackend::HostBackend(HostBackendSettings settings) : settings_(settings) {}

HostBackend::~HostBackend() {
  // Whatever a test leaked, the process gets back.
  for (const auto& [pointer, entry] : allocations_)
    std::free(const_cast<std::byte*>(pointer));
  for (const auto& [pointer, size] : staging_)
    std::free(const_cast<void*>(pointer));
}

int HostBackend::device_count() noexcept {
  return settings_.devices;
}

void HostBackend::use_device(int device) {
  if (device < 0 || device >= settings_.devices) {
    throw DeviceError(Errc::kDeviceOrdinalOutOfRange,
                      fmt::format("host backend: no device {}", device));
  }
  const std::lock_guard lock(mutex_);
  device_threads_.insert(std::this_thread::get_id());
}

bool HostBackend::used_device_on(std::thread::id id) const {
  const std::lock_guard lock(mutex_);
  return device_threads_.count(id) > 0;
}

void* HostBackend::allocate(int device, std::size_t bytes) {
  PTHLOAD_ASSERT(bytes > 0);
  const std::lock_guard lock(mutex_);
  const auto call = counts_.allocate_calls++;
  if (static_cast<int>(call) == settings_.fail_allocation_at) {
    throw DeviceError(Errc::kDeviceAllocationFailed, "out of memory (host backend, injected)");
  }
  void* pointer = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (pointer == nullptr) throw DeviceError(Errc::kDeviceAllocationFailed, "out of memory");
  allocations_.emplace(static_cast<const std::byte*>(pointer), std::pair(bytes, device));
  ++counts_.device_allocations;
  counts_.device_bytes += bytes;
  return pointer;
}

void HostBackend::free(int device, void* pointer) noexcept {
  const std::lock_guard lock(mutex_);
  const auto found = allocations_.find(static_cast<const std::byte*>(pointer));
  PTHLOAD_ASSERT(found != allocations_.end() && found->second.second == device);
  (void)device;
  if (found == allocations_.end()) return;
  counts_.device_bytes -= found->second.first;
  --counts_.device_allocations;
  allocations_.erase(found);
  std::free(pointer);
}

void* HostBackend::allocate_staging(std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  if (static_cast<int>(staging_calls_++) == settings_.fail_staging_at) {
    throw DeviceError(Errc::kDeviceAllocationFailed,
                      "pinned host memory: out of memory (host backend, injected)");
  }
  void* pointer = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (pointer == nullptr) throw DeviceError(Errc::kDeviceAllocationFailed, "out of memory");
  staging_.emplace(pointer, bytes);
  ++counts_.staging_allocations;
  counts_.staging_bytes += bytes;
  counts_.peak_staging_bytes = std::max(counts_.peak_staging_bytes, counts_.staging_bytes);
  return pointer;
}

void HostBackend::free_staging(void* pointer) noexcept {
  const std::lock_guard lock(mutex_);
  const auto found = staging_.find(pointer);
  PTHLOAD_ASSERT(found != staging_.end());
  if (found == staging_.end()) return;
  counts_.staging_bytes -= found->second;
  --counts_.staging_allocations;
  staging_.erase(found);
  std::free(pointer);
}

StreamHandle HostBackend::create_stream(int device) {
  use_device(device);
  auto* stream = new Stream();
  const std::lock_guard lock(mutex_);
  ++counts_.streams;
  return stream;
}

void HostBackend::destroy_stream(StreamHandle stream) noexcept {
  delete as_stream(stream);
  const std::lock_guard lock(mutex_);
  --counts_.streams;
}

EventHandle HostBackend::create_event(int device) {
  use_device(device);
  auto* event = new Event();
  const std::lock_guard lock(mutex_);
  ++counts_.events;
  return event;
}

void HostBackend::destroy_event(EventHandle event) noexcept {
  delete static_cast<Event*>(event);
  const std::lock_guard lock(mutex_);
  --counts_.events;
}

void HostBackend::check_device_range(const void* pointer, std::size_t bytes) const {
  const std::lock_guard lock(mutex_);
  const auto* begin = static_cast<const std::byte*>(pointer);
  auto found = allocations_.upper_bound(begin);
  const bool inside = found != allocations_.begin() &&
                      (--found, begin + bytes <= found->first + found->second.first);
  if (!inside) {
    throw std::logic_error(fmt::format(
        "host backend: {} bytes at {} are not inside one device allocation", bytes, pointer));
  }
}

void HostBackend::copy_to_device(void* destination, const void* source, std::size_t bytes,
                                 StreamHandle stream) {
  check_device_range(destination, bytes);
  {
    const std::lock_guard lock(mutex_);
    if (static_cast<int>(counts_.copy_calls++) == settings_.fail_copy_at) {
      throw DeviceError(Errc::kDeviceCopyFailed,
                        "copy to the device failed (host backend, "
                        "injected)");
    }
  }
  as_stream(stream)->enqueue([destination, source, bytes, delay = settings_.copy_delay] {
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    std::memcpy(destination, source, bytes);
  });
}

void HostBackend::copy_to_host(void* destination, const void* source, std::size_t bytes,
                               StreamHandle stream) {
  check_device_range(source, bytes);
  as_stream(stream)->enqueue([=] { std::memcpy(destination, source, bytes); });
  as_stream(stream)->drain();
}

void HostBackend::record_event(EventHandle handle, StreamHandle stream) {
  auto* event = static_cast<Event*>(handle);
  std::size_t ticket;
  {
    const std::lock_guard lock(event->mutex);
    ticket = ++event->recorded;
  }
  as_stream(stream)->enqueue([event, ticket] {
    {
      const std::lock_guard lock(event->mutex);
      event->reached = std::max(event->reached, ticket);
    }
    event->reached_changed.notify_all();
  });
}

void HostBackend::wait_event(EventHandle handle) {
  auto* event = static_cast<Event*>(handle);
  std::unique_lock lock(event->mutex);
  const std::size_t target = event->recorded;
  event->reached_changed.wait(lock, [&] { return event->reached >= target; });
}

void HostBackend::synchronize(StreamHandle stream) {
  as_stream(stream)->drain();
}

void HostBackend::byteswap(void* data, std::size_t bytes, std::size_t unit, StreamHandle stream) {
  check_device_range(data, bytes);
  as_stream(stream)->enqueue([=] { cpu::byteswap({static_cast<std::byte*>(data), bytes}, unit); });
}

void HostBackend::convert(const void* source, Dtype from, void* destination, Dtype to,
                          std::size_t count, StreamHandle stream) {
  check_device_range(source, count * element_size(from));
  check_device_range(destination, count * element_size(to));
  as_stream(stream)->enqueue([=] {
    cpu::convert({static_cast<const std::byte*>(source), count * element_size(from)}, from,
                 {static_cast<std::byte*>(destination), count * element_size(to)}, to, count);
  });
}

void HostBackend::make_contiguous(const void* source, const StridedView& view, void* destination,
                                  StreamHandle stream) {
  check_device_range(source, cpu::strided_extent(view));
  check_device_range(destination, cpu::element_count(view) * view.element_size);
  as_stream(stream)->enqueue([=] {
    cpu::make_contiguous(static_cast<const std::byte*>(source), view,
                         static_cast<std::byte*>(destination));
  });
}

HostBackend::Counts HostBackend::counts() const {
  const std::lock_guard lock(mutex_);
  return counts_;
}

int HostBackend::device_of(const void* pointer) const {
  const std::lock_guard lock(mutex_);
  const auto* at = static_cast<const std::byte*>(pointer);
  auto found = allocations_.upper_bound(at);
  if (found == allocations_.begin()) return -1;
  --found;
  return at < found->first + found->second.first ? found->second.second : -1;
}

}  // namespace pthload::device
