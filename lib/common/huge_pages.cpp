#include "common/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>

namespace pthload::common {

void advise_huge_pages(std::byte* begin, std::size_t size) noexcept {
#ifdef MADV_HUGEPAGE
  const auto start = reinterpret_cast<std::uintptr_t>(begin);
  const auto first = (start + kHugePageBytes - 1) & ~std::uintptr_t{kHugePageBytes - 1};
  const auto last = (start + size) & ~std::uintptr_t{kHugePageBytes - 1};
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)begin;
  (void)size;
#endif
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
