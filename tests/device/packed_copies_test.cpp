// device/cpu/packed_copies: the block the small owned copies of a copy load share.
#include "device/cpu/packed_copies.hpp"

#include <doctest/doctest.h>

#include <cstdint>

#include "common/fresh_memory.hpp"

using pthload::device::cpu::PackedCopies;

namespace {

std::uintptr_t address(const std::byte* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer);
}

}  // namespace

TEST_CASE("device: packed copies are 64-byte aligned pieces of one block, in order") {
  PackedCopies packed;
  packed.expect(16);
  packed.expect(100);
  packed.expect(PackedCopies::kMaxPieceBytes);
  CHECK(packed.block() == nullptr);  // nothing allocated before the first piece

  const auto first = packed.take(16);
  const auto second = packed.take(100);
  const auto third = packed.take(PackedCopies::kMaxPieceBytes);
  REQUIRE(first.size() == 16);
  REQUIRE(second.size() == 100);
  REQUIRE(third.size() == PackedCopies::kMaxPieceBytes);
  CHECK(address(first.data()) % 64 == 0);
  CHECK(address(second.data()) == address(first.data()) + 64);
  CHECK(address(third.data()) == address(second.data()) + 128);
  CHECK(packed.block().get() == first.data());
  // The pieces are writable memory of the block.
  third.back() = std::byte{7};
  CHECK(packed.block().get()[64 + 128 + PackedCopies::kMaxPieceBytes - 1] == std::byte{7});

  // The room expected is used up: the caller allocates on its own.
  CHECK(packed.take(16).empty());
}

TEST_CASE("device: packed copies leave empty and large storages to buffers of their own") {
  CHECK_FALSE(PackedCopies::is_packed(0));
  CHECK(PackedCopies::is_packed(1));
  CHECK(PackedCopies::is_packed(PackedCopies::kMaxPieceBytes));
  CHECK_FALSE(PackedCopies::is_packed(PackedCopies::kMaxPieceBytes + 1));

  PackedCopies packed;
  packed.expect(0);
  packed.expect(PackedCopies::kMaxPieceBytes + 1);
  CHECK(packed.take(PackedCopies::kMaxPieceBytes + 1).empty());
  CHECK(packed.take(8).empty());  // nothing was expected
  CHECK(packed.block() == nullptr);

  PackedCopies some;
  some.expect(8);
  CHECK(some.take(0).empty());
  CHECK(some.take(PackedCopies::kMaxPieceBytes + 1).empty());
  CHECK(some.take(8).size() == 8);
}

TEST_CASE("device: a block of packed copies outlives the PackedCopies that cut it") {
  // Past kLargeBlockBytes: the block is a mapping of its own.
  const std::size_t pieces = 2 * pthload::common::kLargeBlockBytes / 64 + 1;
  std::shared_ptr<const std::byte> kept;
  std::span<std::byte> last;
  {
    PackedCopies packed;
    for (std::size_t i = 0; i < pieces; ++i)
      packed.expect(64);
    for (std::size_t i = 0; i < pieces; ++i)
      last = packed.take(64);
    REQUIRE(last.size() == 64);
    last.front() = std::byte{42};
    kept = packed.block();
  }
  REQUIRE(kept != nullptr);
  CHECK(kept.get()[(pieces - 1) * 64] == std::byte{42});
}

TEST_CASE("device: a storage too large to pack allocates no block") {
  PackedCopies packed;
  packed.expect(16);
  CHECK(packed.take(PackedCopies::kMaxPieceBytes + 1).empty());
  CHECK(packed.block() == nullptr);
  CHECK(packed.take(16).size() == 16);
  CHECK(packed.block() != nullptr);
}
