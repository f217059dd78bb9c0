// The GPU placement pipeline (see pipeline.hpp). Its shape follows what was measured on an H100
// (DESIGN.md "Placement on GPUs"): a pageable copy per storage reaches 5-7 GB/s, several reader
// threads feeding a few pinned buffers 12-33 GB/s against a 54 GB/s pinned ceiling.
#include "device/pipeline.hpp"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <thread>

#include "common/assert.hpp"
#include "device/worker_threads.hpp"
#include "pthload/error.hpp"

namespace pthload::device {
namespace {

// Device allocations start 256-aligned; an arena starts at the file offset rounded down to this,
// so each storage in it keeps its file offset's alignment (torch pads records to 64 bytes).
constexpr std::size_t kArenaAlignment = 256;
// Bytes of file between two storages an arena may copy along: a zip local header and torch's
// padding are ~100 bytes, so this only ever joins neighbours.
constexpr std::size_t kMaxArenaGap = 4096;
constexpr std::size_t kMinStagingBytes = 4096;

// Milliseconds since `since`, which it moves to now.
double lap(std::chrono::steady_clock::time_point& since) {
  const auto now = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - since).count();
  since = now;
  return ms;
}

std::string device_name(int device) {
  return Device::cuda(device).to_string();
}

// One device allocation and the jobs placed in it.
struct Allocation {
  int device = 0;
  std::uint64_t file_begin = 0;  // an arena: where in the file its first byte is
  std::size_t bytes = 0;
  const std::byte* source = nullptr;           // the host bytes copied into it, all `bytes` of them
  const common::MappedFile* reader = nullptr;  // reads `source` (pread), or nullptr: memory
  std::vector<std::size_t> jobs;
  std::vector<std::size_t> offsets;  // of each job in the allocation
  bool is_arena = false;
  std::shared_ptr<DeviceBlock> block;
};

// What the errors of an allocation name: its storage, or an arena's first and last.
std::string subject(const Allocation& allocation, std::span<const DeviceJob> jobs) {
  const auto& first = jobs[allocation.jobs.front()].storage->key;
  if (allocation.jobs.size() == 1) return fmt::format("storage '{}'", first);
  return fmt::format("storages '{}'..'{}' ({} storages sharing one allocation)", first,
                     jobs[allocation.jobs.back()].storage->key, allocation.jobs.size());
}

std::uint64_t file_offset(const DeviceJob& job) {
  return static_cast<std::uint64_t>(job.source.data() - job.file.data());
}

// Jobs in the order given (the file's), grouped into allocations: an arena per run of small
// neighbouring storages on one device, one allocation per other storage; none for empty ones.
std::vector<Allocation> lay_out(std::span<const DeviceJob> jobs, const CudaOptions& options) {
  std::vector<Allocation> allocations;
  std::map<int, std::size_t> open_arena;  // device → index of its arena still growing
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const DeviceJob& job = jobs[i];
    if (job.source.empty()) continue;
    const bool small = !job.file.empty() && job.source.size() < options.arena_storage_bytes &&
                       file_offset(job) % std::max<std::size_t>(job.alignment, 1) == 0;
    if (small) {
      const std::uint64_t begin = file_offset(job);
      const std::uint64_t end = begin + job.source.size();
      if (const auto open = open_arena.find(job.device); open != open_arena.end()) {
        Allocation& arena = allocations[open->second];
        const std::uint64_t arena_end = arena.file_begin + arena.bytes;
        if (arena.source + arena.bytes <= job.source.data() && begin >= arena_end &&
            begin - arena_end <= kMaxArenaGap &&
            end - arena.file_begin <= options.arena_max_bytes &&
            job.file.data() + arena.file_begin == arena.source) {
          arena.bytes = static_cast<std::size_t>(end - arena.file_begin);
          arena.jobs.push_back(i);
          arena.offsets.push_back(static_cast<std::size_t>(begin - arena.file_begin));
          arena.is_arena = true;
          continue;
        }
      }
      const std::uint64_t arena_begin = begin / kArenaAlignment * kArenaAlignment;
      open_arena[job.device] = allocations.size();
      allocations.push_back({.device = job.device,
                             .file_begin = arena_begin,
                             .bytes = static_cast<std::size_t>(end - arena_begin),
                             .source = job.file.data() + arena_begin,
                             .reader = job.reader,
                             .jobs = {i},
                             .offsets = {static_cast<std::size_t>(begin - arena_begin)}});
      continue;
    }
    allocations.push_back({.device = job.device,
                           .bytes = job.source.size(),
                           .source = job.source.data(),
                           .reader = job.reader,
                           .jobs = {i},
                           .offsets = {0}});
  }
  return allocations;
}

// Maps a chunk of the file in one call before it is copied: faulting a mapped file 4 KiB at a
// time is most of the cost of reading it from a warm page cache. Advice only.
void prefault(const std::byte* source, std::size_t bytes) {
#ifdef MADV_POPULATE_READ
  constexpr std::size_t kWorthIt = std::size_t{256} << 10;
  if (bytes < kWorthIt) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(source) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(source) + bytes;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)source;
  (void)bytes;
#endif
}

struct Chunk {
  const std::byte* source;
  const common::MappedFile* reader;
  std::byte* destination;
  std::size_t bytes;
  int device;
  std::size_t allocation;
  std::uint64_t storage_bytes;  // of storages in it: an arena's chunk also holds the gaps
};

struct Slot {
  std::byte* buffer = nullptr;
  EventHandle event = nullptr;
  bool in_flight = false;  // a copy from it was enqueued after the event's last record
};

// The staging slots of one device: readers take a free one, wait for its last copy to have
// finished, fill it, enqueue the copy and the event, and give it back. Slots arrive while the
// readers run (see provision_staging); a ring whose staging failed gives readers none.
class Ring {
 public:
  void give_back(Slot* slot) {
    {
      const std::lock_guard lock(mutex_);
      free_.push_back(slot);
    }
    available_.notify_one();
  }
  /// A free slot, once there is one; nullptr once fail() was called.
  Slot* take() {
    std::unique_lock lock(mutex_);
    available_.wait(lock, [&] { return !free_.empty() || failed_; });
    if (failed_) return nullptr;
    Slot* slot = free_.back();
    free_.pop_back();
    return slot;
  }
  void fail() {
    {
      const std::lock_guard lock(mutex_);
      failed_ = true;
    }
    available_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<Slot*> free_;
  bool failed_ = false;
};

// Streams, events and staging buffers of one pipeline run, released in a safe order whatever
// happened: every copy that may still read a staging buffer is waited for first.
struct Resources {
  std::shared_ptr<Backend> backend;
  std::map<int, StreamHandle> streams;
  bool streams_owned = true;
  std::vector<std::pair<int, Slot>> slots;

  ~Resources() {
    for (const auto& [device, slot] : slots) {
      try {
        backend->use_device(device);
        if (slot.in_flight) backend->wait_event(slot.event);
      } catch (...) {  // NOLINT(bugprone-empty-catch): the failure being unwound says more
      }
    }
    for (const auto& [device, stream] : streams) {
      try {
        backend->use_device(device);
        if (streams_owned) backend->synchronize(stream);
      } catch (...) {  // NOLINT(bugprone-empty-catch)
      }
    }
    for (const auto& [device, slot] : slots) {
      if (slot.event != nullptr) backend->destroy_event(slot.event);
      if (slot.buffer != nullptr) backend->free_staging(slot.buffer);
    }
    if (streams_owned) {
      for (const auto& [device, stream] : streams)
        backend->destroy_stream(stream);
    }
  }
};

template <typename Body>
void naming(const std::string& what, Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    throw DeviceError(e.code(), fmt::format("{}: {}", what, e.message()));
  }
}

std::vector<std::unique_ptr<internal::DeviceMemory>> run(const std::shared_ptr<Backend>& backend,
                                                         std::span<const DeviceJob> jobs,
                                                         const CudaOptions& options,
                                                         Progress& progress,
                                                         PipelineReport& report) {
  std::vector<int> devices;  // sorted; a handful at most, so a sorted vector beats a set
  for (const auto& job : jobs) {
    if (!devices.empty() && devices.back() == job.device) continue;  // runs of one device
    const auto at = std::lower_bound(devices.begin(), devices.end(), job.device);
    if (at == devices.end() || *at != job.device) devices.insert(at, job.device);
  }
  check_cuda_options(options, devices.size());
  auto clock = std::chrono::steady_clock::now();

  // Device memory first: an out-of-memory fails before a byte is read. Declared before the
  // streams, so on failure the copies into it are waited for before it is freed.
  std::vector<Allocation> allocations = lay_out(jobs, options);
  const auto allocator = options.allocator.allocate
                             ? std::make_shared<const DeviceAllocator>(options.allocator)
                             : nullptr;
  for (auto& allocation : allocations) {
    backend->use_device(allocation.device);
    naming(fmt::format("{} on {} ({} bytes)", subject(allocation, jobs),
                       device_name(allocation.device), allocation.bytes),
           [&] {
             allocation.block = std::make_shared<DeviceBlock>(backend, allocator, allocation.device,
                                                              allocation.bytes);
           });
    ++report.allocations;
    report.arenas += allocation.is_arena ? 1 : 0;
  }

  report.allocate_ms = lap(clock);

  Resources resources{.backend = backend, .streams_owned = options.stream == nullptr};
  std::vector<Chunk> chunks;
  const std::size_t slot_limit = std::max(options.staging_buffer_bytes, kMinStagingBytes);
  std::map<int, std::size_t> chunks_per_device;
  std::size_t largest_chunk = 0;
  for (std::size_t a = 0; a < allocations.size(); ++a) {
    const auto& allocation = allocations[a];
    std::size_t member = 0;  // the first job not wholly before this chunk
    for (std::size_t at = 0; at < allocation.bytes; at += slot_limit) {
      const std::size_t bytes = std::min(slot_limit, allocation.bytes - at);
      std::uint64_t storage_bytes = 0;
      for (std::size_t m = member; m < allocation.jobs.size(); ++m) {
        const std::size_t begin = allocation.offsets[m];
        const std::size_t end = begin + jobs[allocation.jobs[m]].source.size();
        if (begin >= at + bytes) break;
        storage_bytes += std::min(end, at + bytes) - std::max(begin, at);
        if (end <= at + bytes) member = m + 1;
      }
      chunks.push_back({allocation.source + at, allocation.reader, allocation.block->data() + at,
                        bytes, allocation.device, a, storage_bytes});
      ++chunks_per_device[allocation.device];
      largest_chunk = std::max(largest_chunk, bytes);
    }
  }
  // A ring per device, never more slots than chunks nor bigger than the largest chunk: a small
  // checkpoint pins kilobytes, not the whole budget.
  const std::size_t slot_bytes =
      (largest_chunk + kMinStagingBytes - 1) / kMinStagingBytes * kMinStagingBytes;
  std::map<int, Ring> rings;
  std::map<int, std::size_t> slots_per_device;
  std::size_t total_slots = 0;
  for (const int device : devices) {
    const std::size_t share = std::max<std::size_t>(1, options.staging_buffers / devices.size());
    slots_per_device[device] = std::min(share, chunks_per_device[device]);
    total_slots += slots_per_device[device];
  }
  std::size_t most_slots = 0;
  for (const int device : devices) {
    backend->use_device(device);
    resources.streams[device] =
        options.stream != nullptr ? options.stream : backend->create_stream(device);
    rings[device];  // made here: the readers and the provisioner only look rings up
    most_slots = std::max(most_slots, slots_per_device[device]);
  }
  // Slot k of every device before slot k + 1 of any: the provisioner below pins them in this
  // order, so every device's readers can start early.
  resources.slots.reserve(total_slots);  // the rings point into it
  for (std::size_t k = 0; k < most_slots; ++k) {
    for (const int device : devices) {
      if (k >= slots_per_device[device]) continue;
      backend->use_device(device);
      resources.slots.emplace_back(device, Slot{}).second.event = backend->create_event(device);
    }
  }

  // Pinning is slow where it was measured (an H200 machine: 64 MiB in 10 to 39 ms, beside 22 ms
  // for copying 953 MB; cuda_backend.cpp), so the readers do not wait for all
  // of it: another thread pins the slots one by one, each device's first ones first, and hands
  // each to its ring as it comes. A failure stops the readers and is the load's error, whether
  // or not they still needed the slot.
  std::exception_ptr staging_failure;
  const auto provision_staging = [&] {
    const auto start = std::chrono::steady_clock::now();
    try {
      int current = -1;
      for (auto& entry : resources.slots) {
        // Names, not a structured binding: clang 14 refuses to capture those in a lambda.
        const int device = entry.first;
        Slot& slot = entry.second;
        if (device != current) {
          backend->use_device(device);
          current = device;
        }
        naming(
            fmt::format("staging buffer of {} bytes for {}", slot_bytes, device_name(device)),
            [&] { slot.buffer = static_cast<std::byte*>(backend->allocate_staging(slot_bytes)); });
        report.staging_bytes += slot_bytes;
        rings.at(device).give_back(&slot);
      }
    } catch (...) {
      staging_failure = std::current_exception();
      for (auto& [device, ring] : rings)
        ring.fail();
    }
    report.staging_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };

  // Readers take chunks in file order; each fills a slot and enqueues its copy.
  const unsigned threads = worker_threads(options.reader_threads, chunks.size());
  report.reader_threads = threads;
  report.copies = chunks.size();
  {
    // Joined before the rings and slots it fills go, whatever the readers did.
    std::jthread provisioner;
    try {
      provisioner = std::jthread(provision_staging);
    } catch (const std::system_error&) {
      provision_staging();  // no thread to spare: pinned first, then read
    }
    run_on_threads(chunks.size(), threads, [&] {
      return [&, current = -1](std::size_t i) mutable {
        const Chunk& chunk = chunks[i];
        Ring& ring = rings.at(chunk.device);
        Slot* slot = ring.take();
        if (slot == nullptr) std::rethrow_exception(staging_failure);
        try {
          if (current != chunk.device) {
            backend->use_device(chunk.device);
            current = chunk.device;
          }
          const StreamHandle stream = resources.streams.at(chunk.device);
          naming(
              fmt::format("copying {} to {} ({} bytes at offset {})",
                          subject(allocations[chunk.allocation], jobs), device_name(chunk.device),
                          chunk.bytes,
                          chunk.destination - allocations[chunk.allocation].block->data()),
              [&] {
                if (slot->in_flight) backend->wait_event(slot->event);
                slot->in_flight = false;
                if (chunk.reader != nullptr) {
                  // pread, not the mapping: a file that shrank gives IoError, not SIGBUS.
                  chunk.reader->copy_out({chunk.source, chunk.bytes}, {slot->buffer, chunk.bytes});
                } else {
                  prefault(chunk.source, chunk.bytes);
                  std::memcpy(slot->buffer, chunk.source, chunk.bytes);
                }
                backend->copy_to_device(chunk.destination, slot->buffer, chunk.bytes, stream);
                slot->in_flight = true;
                backend->record_event(slot->event, stream);
              });
        } catch (...) {
          ring.give_back(slot);
          throw;
        }
        ring.give_back(slot);
        progress.add(chunk.storage_bytes);
      };
    });
  }
  if (staging_failure) std::rethrow_exception(staging_failure);
  report.copy_ms = lap(clock);

  // Big-endian storages are swapped on the device, after their copies on the same stream.
  for (std::size_t a = 0; a < allocations.size(); ++a) {
    const auto& allocation = allocations[a];
    backend->use_device(allocation.device);
    for (std::size_t m = 0; m < allocation.jobs.size(); ++m) {
      const DeviceJob& job = jobs[allocation.jobs[m]];
      if (job.swap_unit <= 1) continue;
      backend->byteswap(allocation.block->data() + allocation.offsets[m], job.source.size(),
                        job.swap_unit, resources.streams.at(allocation.device));
    }
  }
  for (const auto& [device, stream] : resources.streams) {
    backend->use_device(device);
    if (options.event != nullptr) backend->record_event(options.event, stream);
    if (resources.streams_owned) backend->synchronize(stream);
  }
  report.finish_ms = lap(clock);

  std::vector<std::unique_ptr<internal::DeviceMemory>> placed(jobs.size());
  for (const auto& allocation : allocations) {
    for (std::size_t m = 0; m < allocation.jobs.size(); ++m)
      placed[allocation.jobs[m]] =
          std::make_unique<DeviceSlice>(allocation.block, allocation.offsets[m]);
  }
  for (auto& memory : placed) {
    if (!memory) memory = std::make_unique<DeviceSlice>(nullptr, 0);  // an empty storage
  }
  return placed;
}

}  // namespace

DeviceBlock::DeviceBlock(std::shared_ptr<Backend> backend,
                         std::shared_ptr<const DeviceAllocator> allocator, int device,
                         std::size_t bytes)
    : backend_(std::move(backend)),
      allocator_(std::move(allocator)),
      device_(device),
      bytes_(bytes) {
  PTHLOAD_ASSERT(bytes > 0);
  if (allocator_) {
    pointer_ = static_cast<std::byte*>(allocator_->allocate(device, bytes));
    if (pointer_ == nullptr) {
      throw DeviceError(Errc::kDeviceAllocationFailed, "the caller's allocator returned nullptr");
    }
  } else {
    pointer_ = static_cast<std::byte*>(backend_->allocate(device, bytes));
  }
}

DeviceBlock::~DeviceBlock() {
  if (!allocator_) {
    backend_->free(device_, pointer_);
  } else if (allocator_->deallocate) {
    allocator_->deallocate(device_, pointer_, bytes_);
  }
}

void Progress::add(std::uint64_t bytes) {
  if (!callback_) return;
  const std::lock_guard lock(mutex_);
  placed_ += bytes;
  callback_(placed_, total_);
}

void run_on_own_thread(const std::function<void()>& body) {
  std::exception_ptr failure;
  std::thread thread([&] {
    try {
      body();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  thread.join();
  if (failure) std::rethrow_exception(failure);
}

void check_cuda_options(const CudaOptions& options, std::size_t devices) {
  if (options.staging_buffers == 0) {
    throw DeviceError(Errc::kDeviceBadOptions, "CudaOptions::staging_buffers must be at least 1");
  }
  if ((options.stream != nullptr || options.event != nullptr) && devices > 1) {
    throw DeviceError(Errc::kDeviceBadOptions,
                      fmt::format("a caller's stream or event serves one device, but this load "
                                  "places storages on {} devices",
                                  devices));
  }
}

std::vector<std::unique_ptr<internal::DeviceMemory>> place_on_devices(
    const std::shared_ptr<Backend>& backend, std::span<const DeviceJob> jobs,
    const CudaOptions& options, Progress& progress, PipelineReport* report) {
  PipelineReport local_report;
  std::vector<std::unique_ptr<internal::DeviceMemory>> placed;
  run_on_own_thread([&] { placed = run(backend, jobs, options, progress, local_report); });
  if (report != nullptr) *report = local_report;
  return placed;
}

}  // namespace pthload::device
