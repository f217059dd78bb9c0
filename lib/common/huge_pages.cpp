#include "common/huge_pages.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>

namespace pthload::common {
namespace {

// Relaxed: a thread that misses another's verdict times one more huge page, which is all it costs.
std::atomic<bool> dear{false};
std::atomic<std::int64_t> dear_after_ns{kDearHugePage.count()};

void advise(std::uintptr_t first, std::uintptr_t last, [[maybe_unused]] int advice) noexcept {
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, advice);
}

}  // namespace

bool fault_in_huge_pages(std::byte* begin, std::size_t size) noexcept {
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE) && defined(MADV_POPULATE_WRITE)
  const auto start = reinterpret_cast<std::uintptr_t>(begin);
  const auto first = (start + kHugePageBytes - 1) & ~std::uintptr_t{kHugePageBytes - 1};
  const auto last = (start + size) & ~std::uintptr_t{kHugePageBytes - 1};
  if (first >= last) return true;  // no whole huge page inside
  if (dear.load(std::memory_order_relaxed)) {
    advise(first, last, MADV_NOHUGEPAGE);
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
  return true;
#else
  (void)begin;
  (void)size;
  return false;
#endif
}

bool huge_pages_dear() noexcept {
  return dear.load(std::memory_order_relaxed);
}

void reset_huge_page_verdict(std::chrono::nanoseconds threshold) noexcept {
  dear_after_ns.store(threshold.count(), std::memory_order_relaxed);
  dear.store(false, std::memory_order_relaxed);
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
