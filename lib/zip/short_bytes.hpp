// Record names compared eight bytes at a time, inline: a torch name is ~16 bytes, for which a
// call to memcmp (and the registers saved around it) costs more than the comparison.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/byte_reader.hpp"

namespace pthload::zip {

/// Whether the `size` bytes at `a` and at `b` are equal.
[[nodiscard]] inline bool equal_bytes(const std::byte* a, const std::byte* b,
                                      std::size_t size) noexcept {
  using common::load_le;
  if (size < 8) {
    for (std::size_t i = 0; i < size; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  for (std::size_t i = 0; i + 8 < size; i += 8) {
    if (load_le<std::uint64_t>(a + i) != load_le<std::uint64_t>(b + i)) return false;
  }
  // The last eight bytes, overlapping those compared when the size is not a multiple of 8.
  return load_le<std::uint64_t>(a + size - 8) == load_le<std::uint64_t>(b + size - 8);
}

}  // namespace pthload::zip
