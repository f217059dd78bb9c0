// common::WarmBlocks: blocks faulted in by a thread of their own, taken by whoever asks first,
// and the BumpArena that takes its largest blocks from them. Residency is read from mincore.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <set>
#include <thread>
#include <vector>

#include "common/bump_arena.hpp"
#include "common/warm_blocks.hpp"
#include "support/residency.hpp"

namespace pthload::common {
namespace {

using test::resident_kib;

constexpr std::uint64_t kBlockKib = WarmBlocks::kBlockBytes / 1024;

// Waits (a minute at most) until `blocks` has made `count` blocks; false if it never does.
bool wait_until_made(const WarmBlocks& blocks, std::size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (blocks.made() < count) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

bool all_zero(const std::byte* block, std::size_t size) {
  return std::all_of(block, block + size, [](std::byte b) { return b == std::byte{0}; });
}

}  // namespace

TEST_CASE("common: with no WarmBlocks alive, take() finds nothing") {
  CHECK(WarmBlocks::take() == nullptr);
  const WarmBlocks none(0);
  CHECK(WarmBlocks::take() == nullptr);
  CHECK(none.made() == 0);
}

TEST_CASE("common: WarmBlocks makes as many blocks as asked, resident and zero, each taken once") {
  const WarmBlocks blocks(3);
  REQUIRE(wait_until_made(blocks, 3));
  std::vector<LargeBlock> taken;
  std::set<const std::byte*> distinct;
  for (int i = 0; i < 3; ++i) {
    LargeBlock block = WarmBlocks::take();
    REQUIRE(block != nullptr);
    CHECK(resident_kib(block.get(), WarmBlocks::kBlockBytes) == kBlockKib);
    CHECK(all_zero(block.get(), WarmBlocks::kBlockBytes));
    distinct.insert(block.get());
    taken.push_back(std::move(block));
  }
  CHECK(distinct.size() == 3);
  CHECK(blocks.taken() == 3);
  CHECK(blocks.made() == 3);
  CHECK(WarmBlocks::take() == nullptr);
  // A taken block is its taker's: writable, and freed by it after the WarmBlocks is gone.
  std::fill(taken.front().get(), taken.front().get() + WarmBlocks::kBlockBytes, std::byte{7});
}

TEST_CASE("common: blocks no one took are not offered once their WarmBlocks is gone") {
  {
    const WarmBlocks blocks(2);
    REQUIRE(wait_until_made(blocks, 2));
  }
  CHECK(WarmBlocks::take() == nullptr);
}

TEST_CASE("common: a WarmBlocks destroyed while its thread works stops it and offers nothing") {
  // 16 blocks take the thread tens of milliseconds: the destructor stops it mid-way (under the
  // sanitizers, a block handed over after the destructor freed the rest would show).
  { const WarmBlocks blocks(16); }
  CHECK(WarmBlocks::take() == nullptr);
}

TEST_CASE("common: a BumpArena takes its largest blocks from a WarmBlocks, faulted in whole") {
  const WarmBlocks blocks(1);
  REQUIRE(wait_until_made(blocks, 1));
  BumpArena arena;
  arena.expect(WarmBlocks::kBlockBytes);
  auto* first = static_cast<std::byte*>(arena.allocate(64, 8));
  CHECK(blocks.taken() == 1);
  CHECK(arena.bytes_reserved() == WarmBlocks::kBlockBytes);
  CHECK(resident_kib(first, WarmBlocks::kBlockBytes) == kBlockKib);
  // The whole block is the arena's: it fills it without asking for another.
  (void)arena.allocate(WarmBlocks::kBlockBytes - 128, 8);
  CHECK(arena.bytes_reserved() == WarmBlocks::kBlockBytes);
  // The next block is not warm (there is none left) and comes from the system.
  (void)arena.allocate(128, 8);
  CHECK(arena.bytes_reserved() == 2 * WarmBlocks::kBlockBytes);
  CHECK(blocks.taken() == 1);
}

}  // namespace pthload::common
