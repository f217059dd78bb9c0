#include "common/bump_arena.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <new>

#include "common/huge_pages.hpp"
#include "common/warm_blocks.hpp"

namespace pthload::common {
namespace {

constexpr std::size_t kFirstBlockSize = 4096;
constexpr std::size_t kMaxBlockSize = std::size_t{4} << 20;
static_assert(WarmBlocks::kBlockBytes == kMaxBlockSize);

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
  if (cursor_ != nullptr && limit_ < block_end_ &&
      needed <= static_cast<std::size_t>(block_end_ - cursor_)) {
    limit_ = fault_in_up_to(limit_, cursor_ + needed);
    return allocate(size, alignment);
  }
  std::size_t block_size = std::max(next_block_size_, kFirstBlockSize);
  next_block_size_ = std::min(block_size * 2, kMaxBlockSize);
  if (needed > block_size) block_size = needed;
  // A block of the largest size that another thread has faulted in already, if one is ready.
  LargeBlock warm = block_size == kMaxBlockSize ? WarmBlocks::take() : LargeBlock{};
  const bool faulted_in = warm != nullptr;
  // Aligned for any fundamental type (operator new's 16 on x86-64 and aarch64, or a page).
  blocks_.push_back(faulted_in ? std::move(warm) : make_large_block(block_size));
  bytes_reserved_ += block_size;
  std::byte* block = blocks_.back().get();
  if (needed > kMaxBlockSize / 2 && cursor_ != nullptr) {
    // A large request gets its own block, leaving the current block's free space in use.
    if (!faulted_in) (void)fault_in_huge_pages(block, block_size);
    const auto address = reinterpret_cast<std::uintptr_t>(block);
    const auto aligned = (address + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
    return reinterpret_cast<void*>(aligned);
  }
  cursor_ = block;
  block_end_ = block + block_size;
  limit_ = block_size >= kHugePageBytes && !faulted_in ? fault_in_up_to(block, block + needed)
                                                       : block_end_;
  return allocate(size, alignment);
}

std::byte* BumpArena::fault_in_up_to(std::byte* from, std::byte* wanted) noexcept {
  // `from` is the block's start or a huge page boundary inside it (blocks from kHugePageBytes on
  // are aligned to it).
  const auto rounded = (reinterpret_cast<std::uintptr_t>(wanted) + kHugePageBytes - 1) &
                       ~std::uintptr_t{kHugePageBytes - 1};
  std::byte* end = std::min(reinterpret_cast<std::byte*>(rounded), block_end_);
  if (fault_in_huge_pages(from, static_cast<std::size_t>(end - from))) return end;
  // The rest of the block faults in as it is written: in small pages where huge ones are dear
  // (advised so, which matters where transparent huge pages are always on).
  if (huge_pages_dear()) (void)fault_in_huge_pages(end, static_cast<std::size_t>(block_end_ - end));
  return block_end_;
}

}  // namespace pthload::common
