// A monotonic arena for many small objects made together and released together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/large_arrays.hpp"

namespace pthload::common {

/// Hands out memory from blocks that start at 4 KiB (a small user costs one; a user that says
/// what it expects to fill, larger) and double up to 4 MiB, those from 2 MiB on mappings of their
/// own (common::LargeBlock, trimmed to 2 MiB alignment without keeping spare address space, which a
/// process under RLIMIT_AS would pay for) that are faulted in a huge page at a time as the cursor
/// reaches them (fault_in_huge_pages: until huge pages prove dear, then 4 KiB at a time as they are
/// written). A block of 4 MiB is taken already faulted in from a WarmBlocks where one is ready
/// (common/warm_blocks.hpp). A request larger than 2 MiB gets a block of its own, faulted in at
/// once, leaving the current block in use. Nothing is freed before the arena. Move-only (moving
/// keeps every pointer valid); not thread-safe. The pickle machine's value tree, the memo and
/// (through an ObjectArena) the storages of a checkpoint are made in these.
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
  /// power of two, at most the largest block) instead of doubling from 4 KiB. A user that will
  /// fill megabytes then skips the small blocks, which are faulted in 4 KiB at a time (512
  /// faults before the first huge page); memory is still touched only as it is used.
  void expect(std::size_t bytes) noexcept;

 private:
  void* allocate_slow(std::size_t size, std::size_t alignment);
  // The new limit_ once the current block's huge pages from `from` (its faulted-in end) up to
  // `wanted` are faulted in: the whole block where they could not be (then it faults in as it is
  // written).
  std::byte* fault_in_up_to(std::byte* from, std::byte* wanted) noexcept;

  std::vector<LargeBlock> blocks_;
  std::byte* cursor_ = nullptr;
  std::byte* limit_ = nullptr;  // what is faulted in of the current block
  std::byte* block_end_ = nullptr;
  std::size_t next_block_size_ = 0;
  std::size_t bytes_reserved_ = 0;
};

}  // namespace pthload::common
