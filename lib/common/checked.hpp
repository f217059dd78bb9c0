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

/// The element count of a row-major shape, or nullopt unless the product of its sizes, each
/// taken as at least 1, fits in an int64: that product bounds every row-major stride (torch
/// takes sizes as at least 1 there too) and the count, so the strides of an empty shape such as
/// (0, 2^40, 2^40) cannot overflow either. Sizes must not be negative.
template <typename Sizes>
[[nodiscard]] constexpr std::optional<std::uint64_t> row_major_numel(const Sizes& sizes) noexcept {
  constexpr auto kMax = static_cast<std::uint64_t>(INT64_MAX);
  std::uint64_t numel = 1;
  std::uint64_t outer_stride = 1;
  for (const auto size : sizes) {
    const auto extent = static_cast<std::uint64_t>(size);
    const auto stride = checked_mul(outer_stride, extent == 0 ? 1 : extent);
    if (!stride || *stride > kMax) return std::nullopt;
    outer_stride = *stride;
    numel *= extent;  // at most outer_stride
  }
  return numel;
}

/// Whether the range [offset, offset + size) lies inside [0, total), without overflow.
[[nodiscard]] constexpr bool fits(std::uint64_t offset, std::uint64_t size,
                                  std::uint64_t total) noexcept {
  return offset <= total && size <= total - offset;
}

}  // namespace pthload::common
