// A monotonic arena for many small objects made together and released together, and the std
// allocator that shares its ownership (for std::allocate_shared).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "common/large_arrays.hpp"

namespace pthload::common {

/// Hands out memory from blocks that start at 4 KiB (a small user costs one; a user that says
/// what it expects to fill, larger) and double up to 4 MiB, those from 2 MiB on huge pages of their
/// own (common::LargeBlock, trimmed to 2 MiB alignment without keeping spare address space, which a
/// process under RLIMIT_AS would pay for); a request larger than half that gets a block of its own,
/// leaving the current block in use. Nothing is freed before the arena. Move-only (moving keeps
/// every pointer valid); not thread-safe. The pickle machine's value tree, the memo and the
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
  /// power of two, at most the largest block) instead of doubling from 4 KiB. A user that will
  /// fill megabytes then skips the small blocks, which are faulted in 4 KiB at a time (512
  /// faults before the first huge page); memory is still touched only as it is used.
  void expect(std::size_t bytes) noexcept;

 private:
  void* allocate_slow(std::size_t size, std::size_t alignment);

  std::vector<LargeBlock> blocks_;
  std::byte* cursor_ = nullptr;
  std::byte* limit_ = nullptr;
  std::size_t next_block_size_ = 0;
  std::size_t bytes_reserved_ = 0;
};

/// Allocates from a BumpArena it co-owns, so that whatever it allocated keeps the arena alive:
/// with std::allocate_shared, the control block holds a copy of the allocator, and the arena
/// lives until the last such object is released. deallocate() frees nothing (the arena's
/// blocks go when it does), so objects released early keep their bytes until then.
template <typename T>
struct BumpArenaAllocator {
  using value_type = T;

  explicit BumpArenaAllocator(std::shared_ptr<BumpArena> arena) noexcept
      : arena(std::move(arena)) {}
  template <typename U>
  explicit(false) BumpArenaAllocator(const BumpArenaAllocator<U>& other) noexcept
      : arena(other.arena) {}

  [[nodiscard]] T* allocate(std::size_t count) {
    static_assert(alignof(T) <= 16);
    if (count > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(arena->allocate(count * sizeof(T), alignof(T)));
  }
  void deallocate(T* /*object*/, std::size_t /*count*/) noexcept {}

  template <typename U>
  friend bool operator==(const BumpArenaAllocator& a, const BumpArenaAllocator<U>& b) noexcept {
    return a.arena == b.arena;
  }

  std::shared_ptr<BumpArena> arena;
};

}  // namespace pthload::common
