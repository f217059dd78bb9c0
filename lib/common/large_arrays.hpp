// Memory for large arrays: a mapping of their own, 2 MiB aligned, so that the user that fills one
// at once can fault it in as huge pages (fault_in_huge_pages, or reserve_filled_soon): one page
// fault per 2 MiB instead of one per 4 KiB, on virtual machines most of what building a
// 100 000-tensor checkpoint's metadata took, where huge pages are cheap.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <new>

#include "common/huge_pages.hpp"

namespace pthload::common {

/// Arrays of at least this many bytes get a mapping of their own.
inline constexpr std::size_t kLargeArrayBytes = kHugePageBytes;

/// `size` bytes (at least kLargeArrayBytes) in an anonymous mapping of their own, aligned to
/// kHugePageBytes; zero-filled, and faulted in as it is touched unless its user faults it in.
/// Unlike posix_memalign's, the alignment costs no address space once it is made: the mapping is
/// trimmed to the pages the block needs. Consults fault_hooks::allocation_fails. Throws
/// std::bad_alloc.
[[nodiscard]] std::byte* map_large_array(std::size_t size);
/// Releases what map_large_array(size) returned.
void unmap_large_array(std::byte* block, std::size_t size) noexcept;

/// A std allocator that gives arrays of at least kLargeArrayBytes their own 2 MiB aligned mapping
/// (map_large_array) and smaller ones operator new's memory. Stateless.
template <typename T>
struct LargeArrayAllocator {
  using value_type = T;

  LargeArrayAllocator() noexcept = default;
  template <typename U>
  explicit(false) LargeArrayAllocator(const LargeArrayAllocator<U>& /*other*/) noexcept {}

  [[nodiscard]] T* allocate(std::size_t count) {
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      throw std::bad_array_new_length();
    }
    const std::size_t bytes = count * sizeof(T);
    if (bytes < kLargeArrayBytes) return std::allocator<T>{}.allocate(count);
    static_assert(alignof(T) <= kHugePageBytes);
    return static_cast<T*>(static_cast<void*>(map_large_array(bytes)));
  }
  void deallocate(T* array, std::size_t count) noexcept {
    const std::size_t bytes = count * sizeof(T);
    if (bytes < kLargeArrayBytes) {
      std::allocator<T>{}.deallocate(array, count);
    } else {
      unmap_large_array(static_cast<std::byte*>(static_cast<void*>(array)), bytes);
    }
  }

  friend bool operator==(const LargeArrayAllocator&, const LargeArrayAllocator&) noexcept {
    return true;
  }
};

/// Frees a block from LargeArrayAllocator<std::byte>: knows its size.
struct LargeBlockDeleter {
  std::size_t size = 0;
  void operator()(std::byte* block) const noexcept {
    LargeArrayAllocator<std::byte>{}.deallocate(block, size);
  }
};
/// An owned, uninitialised block of bytes: a mapping of its own from kLargeArrayBytes on.
using LargeBlock = std::unique_ptr<std::byte[], LargeBlockDeleter>;

/// A LargeBlock of `size` bytes (> 0). Throws std::bad_alloc.
[[nodiscard]] inline LargeBlock make_large_block(std::size_t size) {
  return LargeBlock(LargeArrayAllocator<std::byte>{}.allocate(size), LargeBlockDeleter{size});
}

/// Reserves room for `count` elements in `array` (a vector with LargeArrayAllocator) that is
/// about to be filled up to there, and faults that room in now (fault_in_huge_pages): an array
/// of 100 000 records in 2 MiB page faults where huge pages are cheap.
template <typename Vector>
void reserve_filled_soon(Vector& array, std::size_t count) {
  array.reserve(count);
  (void)fault_in_huge_pages(reinterpret_cast<std::byte*>(array.data()),
                            array.capacity() * sizeof(typename Vector::value_type));
}

}  // namespace pthload::common
