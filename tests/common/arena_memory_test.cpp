// common::map_fresh, LargeArrayAllocator and BumpArena: the memory a 100 000-tensor
// checkpoint's metadata is built in.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "common/bump_arena.hpp"
#include "common/fresh_memory.hpp"

namespace pthload::common {
namespace {

// The process's mapped address space, in KiB, from /proc (0 where there is none).
std::uint64_t vm_size_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmSize:")) return std::stoull(line.substr(7));
  }
  return 0;
}

bool aligned_to(const void* pointer, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
}

}  // namespace

TEST_CASE("common: a large block is 2 MiB aligned, zeroed and costs no spare address space") {
  const std::size_t size = (std::size_t{6} << 20) + 100;
  (void)vm_size_kib();  // whatever reading /proc first allocates is not counted below
  const std::uint64_t before = vm_size_kib();
  std::byte* block = map_fresh(size);
  const std::uint64_t after = vm_size_kib();
  CHECK(aligned_to(block, kLargeBlockBytes));
  CHECK(std::all_of(block, block + size, [](std::byte b) { return b == std::byte{0}; }));
  std::fill(block, block + size, std::byte{0x5a});
  CHECK(block[size - 1] == std::byte{0x5a});
  if (before != 0) {
    // The 2 MiB of slack the block was slid within are unmapped again: what is left is the
    // block's own pages.
    CHECK(after - before == (size + 4095) / 4096 * 4);
  }
  unmap_fresh(block, size);
  if (before != 0) CHECK(vm_size_kib() == before);
}

TEST_CASE("common: LargeArrayAllocator serves small arrays from the heap and large ones mapped") {
  std::vector<std::uint64_t, LargeArrayAllocator<std::uint64_t>> values;
  for (std::uint64_t i = 0; i < 1'000'000; ++i)
    values.push_back(i * 3);
  CHECK(values.capacity() * sizeof(std::uint64_t) >= kLargeBlockBytes);
  CHECK(aligned_to(values.data(), kLargeBlockBytes));
  bool intact = true;
  for (std::uint64_t i = 0; i < values.size(); ++i)
    intact = intact && values[i] == i * 3;
  CHECK(intact);
  values.resize(10);
  values.shrink_to_fit();
  CHECK(values.back() == 27);
  CHECK(LargeArrayAllocator<int>{} == LargeArrayAllocator<char>{});
  CHECK_THROWS_AS((void)LargeArrayAllocator<std::uint64_t>{}.allocate(SIZE_MAX / 4),
                  std::bad_array_new_length);
}

TEST_CASE("common: BumpArena hands out aligned, disjoint memory, large requests included") {
  BumpArena arena;
  std::vector<std::pair<std::byte*, std::size_t>> taken;
  const std::size_t sizes[] = {1, 24, 3, 16, 100'000, 7, std::size_t{5} << 20, 40};
  for (int round = 0; round < 50; ++round) {
    for (const std::size_t size : sizes) {
      const std::size_t alignment = size % 2 == 0 ? 16 : 1;
      auto* bytes = static_cast<std::byte*>(arena.allocate(size, alignment));
      CHECK(aligned_to(bytes, alignment));
      std::fill(bytes, bytes + size, static_cast<std::byte>(taken.size()));
      taken.emplace_back(bytes, size);
    }
  }
  std::sort(taken.begin(), taken.end());
  for (std::size_t i = 1; i < taken.size(); ++i)
    CHECK(taken[i - 1].first + taken[i - 1].second <= taken[i].first);
  CHECK_THROWS_AS((void)arena.allocate(SIZE_MAX - 4, 16), std::bad_alloc);
}

TEST_CASE("common: BumpArena::expect sizes the next blocks, within the largest block") {
  BumpArena plain;
  (void)plain.allocate(8, 8);
  CHECK(plain.bytes_reserved() == 4096);  // a small user costs one small block

  BumpArena expecting;
  expecting.expect(std::size_t{1} << 20);
  auto* first = static_cast<std::byte*>(expecting.allocate(8, 8));
  CHECK(expecting.bytes_reserved() == std::size_t{1} << 20);
  // What follows is carved from that block: no second block for the next megabyte.
  auto* last = static_cast<std::byte*>(expecting.allocate((std::size_t{1} << 20) - 64, 8));
  CHECK(last > first);
  CHECK(expecting.bytes_reserved() == std::size_t{1} << 20);

  // Sizes round up to a power of two and stop at the largest block (4 MiB): an expectation of
  // a gigabyte reserves no gigabyte.
  BumpArena large;
  large.expect(std::size_t{1} << 30);
  (void)large.allocate(8, 8);
  CHECK(large.bytes_reserved() == std::size_t{4} << 20);
  BumpArena odd;
  odd.expect(5000);
  (void)odd.allocate(8, 8);
  CHECK(odd.bytes_reserved() == 8192);

  // Told after its first block, an arena sizes the blocks still to come.
  plain.expect(std::size_t{2} << 20);
  (void)plain.allocate(8192, 8);
  CHECK(plain.bytes_reserved() == 4096 + (std::size_t{2} << 20));
}

}  // namespace pthload::common
