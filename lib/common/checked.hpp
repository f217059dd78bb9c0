// Overflow-checked arithmetic for every size and offset that comes from a file.
#pragma once

#include <cstdint>
#include <optional>

namespace pthload::common {

/// a + b, or nullopt when it does not fit in 64 bits.
[[nodiscard]] constexpr std::optional<std::uint64_t> checked_add(std::uint64_t a,
                                                                 std::uint64_t b) noexcept {
  std::uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

/// a * b, or nullopt when it does not fit in 64 bits.
[[nodiscard]] constexpr std::optional<std::uint64_t> checked_mul(std::uint64_t a,
                                                                 std::uint64_t b) noexcept {
  std::uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

/// Whether the range [offset, offset + size) lies inside [0, total), without overflow.
[[nodiscard]] constexpr bool fits(std::uint64_t offset, std::uint64_t size,
                                  std::uint64_t total) noexcept {
  return offset <= total && size <= total - offset;
}

}  // namespace pthload::common
