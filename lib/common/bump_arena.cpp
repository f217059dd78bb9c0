#include "common/bump_arena.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <new>

namespace pthload::common {
namespace {

constexpr std::size_t kFirstBlockSize = 4096;
constexpr std::size_t kMaxBlockSize = std::size_t{4} << 20;

}  // namespace

void BumpArena::expect(std::size_t bytes) noexcept {
  std::size_t block_size = kFirstBlockSize;
  while (block_size < bytes && block_size < kMaxBlockSize)
    block_size *= 2;
  next_block_size_ = std::max(next_block_size_, block_size);
}

void* BumpArena::allocate_slow(std::size_t size, std::size_t alignment) {
  assert(alignment <= 16 && (alignment & (alignment - 1)) == 0);
  // Room for the worst-case alignment padding, checked so that a size near SIZE_MAX from a
  // hostile length cannot wrap.
  if (size > SIZE_MAX - 16) throw std::bad_alloc();
  const std::size_t needed = size + alignment;
  std::size_t block_size = std::max(next_block_size_, kFirstBlockSize);
  next_block_size_ = std::min(block_size * 2, kMaxBlockSize);
  if (needed > block_size) block_size = needed;
  // Aligned for any fundamental type (operator new's 16 on x86-64 and aarch64, or a page).
  blocks_.push_back(make_large_block(block_size));
  bytes_reserved_ += block_size;
  std::byte* block = blocks_.back().get();
  if (needed > kMaxBlockSize / 2 && cursor_ != nullptr) {
    // A large request gets its own block, leaving the current block's free space in use.
    const auto address = reinterpret_cast<std::uintptr_t>(block);
    const auto aligned = (address + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
    return reinterpret_cast<void*>(aligned);
  }
  cursor_ = block;
  limit_ = block + block_size;
  return allocate(size, alignment);
}

}  // namespace pthload::common
