#include "common/huge_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace pthload::common {
namespace {

// Relaxed: a thread that misses another's verdict times one more huge page, which is all it costs.
std::atomic<bool> dear{false};
// Set once a range of kProbeWorthyBytes was faulted in as cheap huge pages.
std::atomic<bool> proven_cheap{false};
std::atomic<std::int64_t> dear_after_ns{kDearHugePage.count()};
// What host_reclaims_free_memory() answers where a test said; kDetect: ask.
std::atomic<HostReclaim> host_override{HostReclaim::kDetect};

bool detect_free_page_reporting() noexcept {
  try {
    std::error_code error;
    const std::filesystem::path balloons("/sys/bus/virtio/drivers/virtio_balloon");
    for (const auto& entry : std::filesystem::directory_iterator(balloons, error)) {
      std::ifstream file(entry.path() / "features");
      std::string features;
      if (file >> features && reports_free_pages(features)) return true;
    }
  } catch (...) {
    // Unreadable sysfs, or no memory to read it: taken as no reporting, as on bare metal.
  }
  return false;
}

void advise(std::uintptr_t first, std::uintptr_t last, [[maybe_unused]] int advice) noexcept {
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, advice);
}

// The whole huge pages inside [begin, begin + size): [first, last), empty where first >= last.
struct WholeHugePages {
  std::uintptr_t first;
  std::uintptr_t last;
};
WholeHugePages whole_huge_pages(const std::byte* begin, std::size_t size) noexcept {
  const auto start = reinterpret_cast<std::uintptr_t>(begin);
  return {.first = (start + kHugePageBytes - 1) & ~std::uintptr_t{kHugePageBytes - 1},
          .last = (start + size) & ~std::uintptr_t{kHugePageBytes - 1}};
}

}  // namespace

bool fault_in_huge_pages(std::byte* begin, std::size_t size, std::size_t part_of) noexcept {
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE) && defined(MADV_POPULATE_WRITE)
  const auto [first, last] = whole_huge_pages(begin, size);
  if (first >= last) return true;  // no whole huge page inside
  if (dear.load(std::memory_order_relaxed)) {
    advise(first, last, MADV_NOHUGEPAGE);
    return false;
  }
  const bool probe_worthy = std::max<std::size_t>(last - first, part_of) >= kProbeWorthyBytes;
  if (!probe_worthy && !proven_cheap.load(std::memory_order_relaxed) &&
      host_reclaims_free_memory()) {
    return false;
  }
  advise(first, last, MADV_HUGEPAGE);
  const std::chrono::nanoseconds dear_after(dear_after_ns.load(std::memory_order_relaxed));
  for (std::uintptr_t page = first; page < last; page += kHugePageBytes) {
    const auto started = std::chrono::steady_clock::now();
    if (!populate_for_writing(reinterpret_cast<std::byte*>(page), kHugePageBytes)) return false;
    if (std::chrono::steady_clock::now() - started > dear_after) {
      dear.store(true, std::memory_order_relaxed);
      advise(page + kHugePageBytes, last, MADV_NOHUGEPAGE);
      return false;
    }
  }
  if (probe_worthy) proven_cheap.store(true, std::memory_order_relaxed);
  return true;
#else
  (void)begin;
  (void)size;
  (void)part_of;
  return false;
#endif
}

void fault_in_for_writing(std::byte* begin, std::size_t size, std::size_t part_of) noexcept {
  const auto [first, last] = whole_huge_pages(begin, size);
  if (!fault_in_huge_pages(begin, size, part_of) || first >= last) {
    write_to_each_page(begin, size);
    return;
  }
  // The huge pages are in: writing to each of their 4 KiB pages again would only pull their
  // cache lines in for pread to overwrite. What lies before and after them is left.
  const auto start = reinterpret_cast<std::uintptr_t>(begin);
  write_to_each_page(begin, first - start);
  write_to_each_page(reinterpret_cast<std::byte*>(last), start + size - last);
}

void write_to_each_page(std::byte* begin, std::size_t size) noexcept {
  if (size == 0) return;
  const std::size_t page = page_bytes();
  volatile std::byte* const bytes = begin;
  // Fresh memory is zero: writing a zero changes nothing but makes the page resident.
  bytes[0] = std::byte{0};
  const auto start = reinterpret_cast<std::uintptr_t>(begin);
  for (std::size_t at = ((start + page) & ~std::uintptr_t{page - 1}) - start; at < size; at += page)
    bytes[at] = std::byte{0};
}

std::size_t page_bytes() noexcept {
  static const std::size_t bytes = [] {
    const long size = ::sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<std::size_t>(size) : std::size_t{4096};
  }();
  return bytes;
}

bool host_reclaims_free_memory() noexcept {
  const HostReclaim host = host_override.load(std::memory_order_relaxed);
  if (host != HostReclaim::kDetect) return host == HostReclaim::kYes;
  static const bool detected = detect_free_page_reporting();
  return detected;
}

bool reports_free_pages(std::string_view features) noexcept {
  // VIRTIO_BALLOON_F_REPORTING (include/uapi/linux/virtio_balloon.h).
  constexpr std::size_t kReportingBit = 5;
  return features.size() > kReportingBit && features[kReportingBit] == '1';
}

bool huge_pages_dear() noexcept {
  return dear.load(std::memory_order_relaxed);
}

void reset_huge_page_verdict(std::chrono::nanoseconds threshold, HostReclaim host) noexcept {
  dear_after_ns.store(threshold.count(), std::memory_order_relaxed);
  dear.store(false, std::memory_order_relaxed);
  proven_cheap.store(false, std::memory_order_relaxed);
  host_override.store(host, std::memory_order_relaxed);
}

bool populate_for_writing(std::byte* begin, std::size_t size) noexcept {
#ifdef MADV_POPULATE_WRITE
  return ::madvise(begin, size, MADV_POPULATE_WRITE) == 0;
#else
  (void)begin;
  (void)size;
  return false;
#endif
}

}  // namespace pthload::common
