// A monotonic arena for many small objects made together and released together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/fresh_memory.hpp"

namespace pthload::common {

/// Hands out memory from blocks that start at 4 KiB (a small user costs one; a user that says
/// what it expects to fill, larger) and double up to 4 MiB, those from kLargeBlockBytes on
/// mappings of their own (common::LargeBlock: the memory policy of common/fresh_memory.hpp). A
/// request larger than half the largest block gets a block of its own, leaving the current block
/// in use. Nothing is freed before the arena. Move-only (moving keeps every pointer valid); not
/// thread-safe. The pickle machine's value tree, the memo and (through an ObjectArena) the
/// storages of a checkpoint are made in these.
class BumpArena {
 public:
  /// `size` bytes aligned to `alignment` (a power of two, at most 16). Throws std::bad_alloc.
  [[nodiscard]] void* allocate(std::size_t size, std::size_t alignment) {
    const auto address = reinterpret_cast<std::uintptr_t>(cursor_);
    const auto aligned = (address + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
    const std::size_t padding = aligned - address;
    const auto room = static_cast<std::size_t>(limit_ - cursor_);
    if (cursor_ != nullptr && padding <= room && size <= room - padding) {
      cursor_ = reinterpret_cast<std::byte*>(aligned) + size;
      return reinterpret_cast<void*>(aligned);
    }
    return allocate_slow(size, alignment);
  }

  /// Bytes obtained from the system so far.
  [[nodiscard]] std::size_t bytes_reserved() const noexcept { return bytes_reserved_; }
  /// Says the arena will hold about `bytes` more: its next blocks are at least that large (a
  /// power of two, at most the largest block) instead of doubling from 4 KiB; memory is still
  /// touched only as it is used.
  void expect(std::size_t bytes) noexcept;

 private:
  void* allocate_slow(std::size_t size, std::size_t alignment);

  std::vector<LargeBlock> blocks_;
  std::byte* cursor_ = nullptr;
  std::byte* limit_ = nullptr;  // the current block's end
  std::size_t next_block_size_ = 0;
  std::size_t bytes_reserved_ = 0;
};

}  // namespace pthload::common
