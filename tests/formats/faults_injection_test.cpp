// SQLite's method on pthload's loads: count the allocations (global operator new and the aligned
// buffers) and the reads (pread) a load of a representative fixture makes, then for every k make
// call k fail and check that the load throws a pthload::Error — or, for the failures POSIX says
// to retry (EINTR) or continue (a short read), succeeds with the same bytes. Leaks are ASan's
// to find (CI runs this suite under ASan with detect_leaks=1). Own executable: it replaces the
// global allocator.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "common/fault_hooks.hpp"
#include "pthload/pthload.hpp"

namespace {

// -1: counting only. Otherwise the number of calls still to succeed before one fails (once).
std::atomic<long> allocations_left{-1};
std::atomic<long> allocations_made{0};
std::atomic<bool> counting{false};
// Whether the run's one failure was injected, and whether into a nothrow allocation: those
// return nullptr by contract and callers may fall back (std::stable_sort's temporary buffer
// does), so a load that survives one is correct.
std::atomic<bool> failure_injected{false};
std::atomic<bool> failure_was_nothrow{false};

bool allocation_fails() noexcept {
  if (!counting.load(std::memory_order_relaxed)) return false;
  allocations_made.fetch_add(1, std::memory_order_relaxed);
  const bool fails = allocations_left.fetch_sub(1, std::memory_order_relaxed) == 0;
  if (fails) failure_injected = true;
  return fails;
}

void* allocate(std::size_t bytes) {
  if (allocation_fails()) throw std::bad_alloc();
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}

void* allocate_aligned(std::size_t bytes, std::align_val_t alignment) {
  if (allocation_fails()) throw std::bad_alloc();
  void* p = nullptr;
  const auto align = std::max(static_cast<std::size_t>(alignment), sizeof(void*));
  if (::posix_memalign(&p, align, bytes == 0 ? 1 : bytes) == 0) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t bytes) {
  return allocate(bytes);
}
void* operator new[](std::size_t bytes) {
  return allocate(bytes);
}
void* operator new(std::size_t bytes, std::align_val_t a) {
  return allocate_aligned(bytes, a);
}
void* operator new[](std::size_t bytes, std::align_val_t a) {
  return allocate_aligned(bytes, a);
}
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return allocate(bytes);
  } catch (...) {
    failure_was_nothrow = true;
    return nullptr;
  }
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return allocate(bytes);
  } catch (...) {
    failure_was_nothrow = true;
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace pthload {
namespace {

enum class ReadFault { kNone, kEio, kEintr, kShort };

std::atomic<long> reads_left{-1};
std::atomic<long> reads_made{0};
std::atomic<ReadFault> read_fault{ReadFault::kNone};

ssize_t faulty_read(int fd, void* buffer, std::size_t bytes, off_t offset) {
  reads_made.fetch_add(1, std::memory_order_relaxed);
  if (reads_left.fetch_sub(1, std::memory_order_relaxed) == 0) {
    switch (read_fault.load()) {
      case ReadFault::kEio:
        errno = EIO;
        return -1;
      case ReadFault::kEintr:
        errno = EINTR;
        return -1;
      case ReadFault::kShort:
        return ::pread(fd, buffer, bytes / 2, offset);
      case ReadFault::kNone:
        break;
    }
  }
  return ::pread(fd, buffer, bytes, offset);
}

bool aligned_allocation_fails(std::size_t) {
  return allocation_fails();
}

// A digest of everything a load produced: names and every storage's bytes.
std::vector<std::string> digest(const Checkpoint& checkpoint) {
  std::vector<std::string> out;
  for (const auto& named : checkpoint.tensors())
    out.push_back(named.name);
  for (const auto& storage : checkpoint.storages()) {
    const auto bytes = storage->bytes();
    out.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return out;
}

struct Fixture {
  const char* name;
  IoStrategy io;
  /// Whether every allocation is made to fail in turn, not only every read.
  bool fail_allocations = true;
};

LoadOptions options_for(const Fixture& fixture) {
  LoadOptions options{.map_location = map_to("cpu"), .copy_cpu_storages = true};
  options.io = fixture.io;
  return options;
}

// One load; true when it succeeded. Anything but a pthload::Error fails the test.
bool try_load(const std::filesystem::path& path, const LoadOptions& options,
              std::vector<std::string>* result) {
  try {
    counting = true;
    const Checkpoint checkpoint = load(path, options);
    counting = false;
    if (result != nullptr) *result = digest(checkpoint);
    return true;
  } catch (const Error&) {
    counting = false;
    return false;
  } catch (const std::exception& e) {
    counting = false;
    FAIL("not a pthload::Error: " << std::string(e.what()));
    return false;
  }
}

}  // namespace

TEST_SUITE("fixtures") {
  TEST_CASE(
      "formats faults: every allocation and every read of representative loads fails in turn") {
    const std::filesystem::path fixtures = PTHLOAD_FIXTURES_DIR;
    const Fixture cases[] = {
        {"sample.pt", IoStrategy::kRead},
        {"sample.pt", IoStrategy::kMap},
        {"torch/torch-2.15.0/legacy_views.pt", IoStrategy::kRead},
        {"torch/torch-2.15.0/torchscript.pt", IoStrategy::kRead},
        {"torch/torch-2.15.0/quantized.pt", IoStrategy::kRead},
        {"torch/torch-2.15.0/nested_tensors.pt", IoStrategy::kRead},
        {"torch/torch-2.15.0/legacy_tied.pt", IoStrategy::kMap},
        {"torch/torch-1.13.0/dtypes.pt", IoStrategy::kMap},
        // nlohmann::json's destructor allocates; lib/safetensors/json_tree.* frees the
        // header's and the index's trees without allocating, so these fail allocations too.
        {"safetensors/layers.safetensors", IoStrategy::kRead},
        {"safetensors/layers.safetensors", IoStrategy::kMap},
        {"shards/bin", IoStrategy::kRead},
        {"shards/bin", IoStrategy::kMap},
        // Two ranks' chunks of DTensors assembled into one buffer per tensor at open().
        {"dcp/sharded", IoStrategy::kRead},
        {"dcp/sharded", IoStrategy::kMap},
    };
    common::fault_hooks::set_read(faulty_read);
    common::fault_hooks::set_allocation_failure(aligned_allocation_fails);
    long allocation_faults = 0;
    long read_faults = 0;
    for (const Fixture& fixture : cases) {
      const bool read_mode = fixture.io == IoStrategy::kRead;
      const std::string name = fixture.name;
      CAPTURE(name);
      CAPTURE(read_mode);
      const auto path = fixtures / fixture.name;
      const LoadOptions options = options_for(fixture);
      std::vector<std::string> reference;
      allocations_left = -1;
      // A first load settles what a process allocates once (function-local statics), so every
      // later load makes the same allocations in the same order.
      REQUIRE(try_load(path, options, nullptr));
      allocations_made = 0;
      reads_left = -1;
      reads_made = 0;
      REQUIRE(try_load(path, options, &reference));
      const long allocations = allocations_made;
      const long reads = reads_made;
      const std::string counts = name + (read_mode ? " (io=read): " : " (io=map): ") +
                                 std::to_string(allocations) + " allocations, " +
                                 std::to_string(reads) + " reads";
      MESSAGE(counts);

      long survived = 0;
      long absorbed = 0;
      for (long k = 0; fixture.fail_allocations && k < allocations; ++k) {
        allocations_left = k;
        failure_injected = false;
        failure_was_nothrow = false;
        const bool loaded = try_load(path, options, nullptr);
        CHECK(failure_injected);  // the same allocations as the reference load
        if (loaded && failure_was_nothrow) {
          ++absorbed;
        } else if (loaded) {
          ++survived;
        }
        ++allocation_faults;
      }
      allocations_left = -1;
      // A failed allocation that throws cannot be recovered from: the load must fail. Only a
      // nothrow allocation's failure may be absorbed by the caller's fallback.
      CHECK(survived == 0);
      if (absorbed > 0) MESSAGE(absorbed << " nothrow allocation failures absorbed by a fallback");

      for (const ReadFault fault : {ReadFault::kEio, ReadFault::kEintr, ReadFault::kShort}) {
        for (long k = 0; k < reads; ++k) {
          read_fault = fault;
          reads_left = k;
          std::vector<std::string> result;
          const bool loaded = try_load(path, options, &result);
          ++read_faults;
          if (fault == ReadFault::kEio) {
            CHECK_FALSE(loaded);
          } else {
            CHECK(loaded);
            CHECK(result == reference);
          }
        }
      }
      reads_left = -1;
    }
    common::fault_hooks::set_read(nullptr);
    common::fault_hooks::set_allocation_failure(nullptr);
    const std::string total = "injected " + std::to_string(allocation_faults) +
                              " allocation failures and " + std::to_string(read_faults) +
                              " read faults (EIO, EINTR, short); none ended in a crash";
    MESSAGE(total);
  }
}

}  // namespace pthload
