// Cache lines: their size, and a hint that the memory at an address will be read soon. Passes
// over 100 000 storages or tensors spend their time waiting for one cold cache line after
// another, and a loop that knows which object comes a few iterations later can have its line on
// the way meanwhile.
#pragma once

#include <cstddef>

namespace pthload::common {

/// The cache line of x86-64 and most AArch64 processors: what prefetch() fetches, and what
/// data two threads write apart is kept apart by. Not std::hardware_destructive_interference_size,
/// which GCC warns may differ between compiler versions (it would change types' layout).
inline constexpr std::size_t kCacheLineBytes = 64;

/// How many objects ahead the passes over every storage or tensor ask for one's memory: far
/// enough that its lines arrive before the pass reaches it (measured on 100 000 storages), near
/// enough that they are still cached then.
inline constexpr std::size_t kPrefetchAhead = 16;

/// Starts fetching the cache line holding `address` (nothing on compilers without the builtin).
inline void prefetch(const void* address) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(address);
#else
  (void)address;
#endif
}

/// prefetch() for every cache line of the `size` bytes at `begin`.
inline void prefetch_lines(const void* begin, std::size_t size) noexcept {
  const auto* bytes = static_cast<const std::byte*>(begin);
  for (std::size_t offset = 0; offset < size; offset += kCacheLineBytes)
    prefetch(bytes + offset);
}

}  // namespace pthload::common
