// A hint that the memory at an address will be read soon: passes over 100 000 storages or
// tensors spend their time waiting for one cold cache line after another, and a loop that knows
// which object comes a few iterations later can have its line on the way meanwhile.
#pragma once

#include <cstddef>

namespace pthload::common {

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
  constexpr std::size_t kLineBytes = 64;
  const auto* bytes = static_cast<const std::byte*>(begin);
  for (std::size_t offset = 0; offset < size; offset += kLineBytes)
    prefetch(bytes + offset);
}

}  // namespace pthload::common
