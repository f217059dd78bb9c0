#include "common/bump_arena.hpp"

#include <algorithm>

namespace pthload::common {

void* BumpArena::allocate_slow(std::size_t size, std::size_t alignment) {
  constexpr std::size_t kMaxBlockSize = std::size_t{4} << 20;
  if (size > SIZE_MAX - alignment) throw std::bad_alloc();
  const std::size_t block_size = std::max(next_block_size_, size + alignment);
  blocks_.push_back(make_large_block(block_size));
  next_block_size_ = std::min(next_block_size_ * 2, kMaxBlockSize);
  cursor_ = blocks_.back().get();
  limit_ = cursor_ + block_size;
  return allocate(size, alignment);
}

}  // namespace pthload::common
