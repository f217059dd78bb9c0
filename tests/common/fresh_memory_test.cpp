// common/fresh_memory.hpp, the one memory policy: what it hands out and what prepare_for_pread
// does to it, checked with mincore (which pages are resident).
#include <doctest/doctest.h>

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "common/aligned_buffer.hpp"
#include "common/bump_arena.hpp"
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

// Waits (at most 20 s, for a loaded sanitizer run) until `blocks` has made `count`.
bool made_within(const ReadyBlocks& blocks, std::size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (blocks.made() < count) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
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

TEST_CASE("common: large AlignedBuffers are aligned for the policy, small ones to 64 bytes") {
  const AlignedBuffer large(kLargeBlockBytes + 1);
  CHECK(reinterpret_cast<std::uintptr_t>(large.data()) % kLargeBlockBytes == 0);
  const AlignedBuffer small(100);
  CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % AlignedBuffer::kAlignment == 0);
  const AlignedBuffer empty(0);
  CHECK(empty.data() != nullptr);
}

TEST_CASE("common: ReadyBlocks hands over resident zero blocks, then nothing, and never waits") {
  ReadyBlocks blocks(2);
  REQUIRE(made_within(blocks, 2));
  CHECK(blocks.made() == 2);
  for (int i = 0; i < 2; ++i) {
    const LargeBlock block = blocks.take();
    REQUIRE(block);
    const std::size_t pages = ReadyBlocks::kBlockBytes / page_bytes();
    CHECK(resident_pages(block.get(), ReadyBlocks::kBlockBytes) == pages);
    CHECK(std::all_of(block.get(), block.get() + ReadyBlocks::kBlockBytes,
                      [](std::byte b) { return b == std::byte{0}; }));
  }
  CHECK_FALSE(blocks.take());  // all taken: an empty block, at once
  CHECK(blocks.taken() == 2);
  const ReadyBlocks none(0);
  CHECK(none.made() == 0);
}

TEST_CASE("common: ReadyBlocks stops making blocks when it is destroyed") {
  // 4 096 blocks would be 16 GiB: destroyed at once, it stops after the block it is making.
  const auto started = std::chrono::steady_clock::now();
  std::size_t made = 0;
  {
    const ReadyBlocks many(4096);
    made = many.made();
  }
  CHECK(made < 4096);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(20));
}

TEST_CASE("common: an arena drawing from ReadyBlocks takes its largest blocks there") {
  ReadyBlocks blocks(1);
  REQUIRE(made_within(blocks, 1));
  BumpArena arena;
  arena.draw_from(&blocks);
  arena.expect(ReadyBlocks::kBlockBytes);  // its next block is a largest one
  auto* first = static_cast<std::byte*>(arena.allocate(64, 16));
  CHECK(blocks.taken() == 1);
  CHECK(resident_pages(first, page_bytes()) == 1);  // made resident by the other thread
  first[0] = std::byte{7};
  // 3 MiB fits in that block; 3 MiB more needs another largest block, which finds none ready
  // and is mapped by the arena itself.
  const std::size_t three_mib = std::size_t{3} << 20;
  (void)arena.allocate(three_mib, 16);
  CHECK(arena.bytes_reserved() == ReadyBlocks::kBlockBytes);
  (void)arena.allocate(three_mib, 16);
  CHECK(blocks.taken() == 1);
  CHECK(arena.bytes_reserved() >= 2 * ReadyBlocks::kBlockBytes);
}

}  // namespace pthload::common
