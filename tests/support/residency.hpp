// How much of a range of this process's memory is resident, for tests of memory faulted in ahead.
#pragma once

#include <doctest/doctest.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pthload::test {

/// KiB of [begin, begin + size) resident (mincore): exact for the range, where a mapping's Rss
/// may include a neighbour the kernel merged it with.
inline std::uint64_t resident_kib(const std::byte* begin, std::size_t size) {
  constexpr std::size_t kPageBytes = 4096;
  const auto start = reinterpret_cast<std::uintptr_t>(begin) & ~std::uintptr_t{kPageBytes - 1};
  const auto end = reinterpret_cast<std::uintptr_t>(begin) + size;
  std::vector<unsigned char> pages((end - start + kPageBytes - 1) / kPageBytes);
  REQUIRE(::mincore(reinterpret_cast<void*>(start), end - start, pages.data()) == 0);
  return static_cast<std::uint64_t>(
             std::count_if(pages.begin(), pages.end(), [](unsigned char p) { return p & 1; })) *
         (kPageBytes / 1024);
}

}  // namespace pthload::test
