// common/fresh_memory.hpp, the one memory policy: what it hands out and what prepare_for_pread
// and populate_for_filler do to it, checked with mincore (which pages are resident).
#include <doctest/doctest.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/aligned_buffer.hpp"
#include "common/fresh_memory.hpp"

namespace pthload::common {
namespace {

// How many of the pages of [begin, begin + size) (page-aligned) are resident.
std::size_t resident_pages(const std::byte* begin, std::size_t size) {
  const std::size_t page = page_bytes();
  std::vector<unsigned char> in_core((size + page - 1) / page);
  if (::mincore(const_cast<std::byte*>(begin), size, in_core.data()) != 0) return SIZE_MAX;
  return static_cast<std::size_t>(
      std::count_if(in_core.begin(), in_core.end(), [](unsigned char c) { return (c & 1) != 0; }));
}

}  // namespace

TEST_CASE("common: fresh memory is faulted in by whoever fills it, not when it is handed out") {
  const std::size_t size = std::size_t{8} << 20;
  const LargeBlock block = make_large_block(size);
  // Without PTHLOAD_HUGE_PAGES, nothing is advised or populated: no page is there yet.
  if (!huge_pages_requested()) CHECK(resident_pages(block.get(), size) == 0);
  block[size / 2] = std::byte{1};
  CHECK(resident_pages(block.get(), size) >= 1);
}

TEST_CASE("common: prepare_for_pread makes every page of a range resident and leaves it zero") {
  const std::size_t size = std::size_t{4} << 20;
  const LargeBlock block = make_large_block(size);
  const std::size_t page = page_bytes();
  // An unaligned range inside the block: its first and last pages are partly outside it.
  const std::size_t from = page + 100;
  const std::size_t length = size - 3 * page;
  prepare_for_pread({block.get() + from, length});
  const std::size_t first_page = from / page;
  const std::size_t last_page = (from + length - 1) / page;
  CHECK(resident_pages(block.get() + first_page * page, (last_page - first_page + 1) * page) ==
        last_page - first_page + 1);
  if (!huge_pages_requested()) {
    // The pages before and after it are left alone.
    CHECK(resident_pages(block.get(), page) == 0);
    CHECK(resident_pages(block.get() + size - page, page) == 0);
  }
  CHECK(
      std::all_of(block.get(), block.get() + size, [](std::byte b) { return b == std::byte{0}; }));
  prepare_for_pread({});  // an empty range is nothing to do
}

TEST_CASE("common: populate_for_filler makes a range resident and keeps what is written in it") {
  const std::size_t size = std::size_t{4} << 20;
  const LargeBlock block = make_large_block(size);
  const std::size_t page = page_bytes();
  // What a filler wrote before the call stays (the call never writes), and so does the rest: zero.
  block[page + 7] = std::byte{42};
  const std::size_t from = page + 100;
  const std::size_t length = 2 * kLargeBlockBytes - 3 * page;
  if (!populate_for_filler({block.get() + from, length})) {
    MESSAGE("the kernel cannot populate (MADV_POPULATE_WRITE is Linux 5.14): nothing to check");
    return;
  }
  const std::size_t first_page = from / page;
  const std::size_t last_page = (from + length - 1) / page;
  CHECK(resident_pages(block.get() + first_page * page, (last_page - first_page + 1) * page) ==
        last_page - first_page + 1);
  if (!huge_pages_requested()) CHECK(resident_pages(block.get() + size - page, page) == 0);
  CHECK(block[page + 7] == std::byte{42});
  CHECK(std::count(block.get(), block.get() + size, std::byte{0}) ==
        static_cast<std::ptrdiff_t>(size - 1));
  CHECK(populate_for_filler({}));  // an empty range is nothing to do
}

TEST_CASE("common: large AlignedBuffers are aligned for the policy, small ones to 64 bytes") {
  const AlignedBuffer large(kLargeBlockBytes + 1);
  CHECK(reinterpret_cast<std::uintptr_t>(large.data()) % kLargeBlockBytes == 0);
  const AlignedBuffer small(100);
  CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % AlignedBuffer::kAlignment == 0);
  const AlignedBuffer empty(0);
  CHECK(empty.data() != nullptr);
}

}  // namespace pthload::common
