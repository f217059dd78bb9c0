#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "common/checked.hpp"

using pthload::common::checked_add;
using pthload::common::checked_mul;
using pthload::common::fits;

constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();

TEST_CASE("common: checked_add reports overflow") {
  CHECK(checked_add(1, 2) == 3u);
  CHECK(checked_add(kMax, 0) == kMax);
  CHECK_FALSE(checked_add(kMax, 1).has_value());
  CHECK_FALSE(checked_add(std::uint64_t{1} << 63, std::uint64_t{1} << 63).has_value());
}

TEST_CASE("common: checked_mul reports overflow") {
  CHECK(checked_mul(0, kMax) == 0u);
  CHECK(checked_mul(std::uint64_t{1} << 32, (std::uint64_t{1} << 32) - 1).has_value());
  CHECK_FALSE(checked_mul(std::uint64_t{1} << 32, std::uint64_t{1} << 32).has_value());
}

TEST_CASE("common: row_major_numel counts elements and refuses strides past int64") {
  using pthload::common::row_major_numel;
  constexpr std::uint64_t kInt64Max = static_cast<std::uint64_t>(INT64_MAX);
  CHECK(row_major_numel(std::vector<std::uint64_t>{}) == 1u);
  CHECK(row_major_numel(std::vector<std::uint64_t>{2, 3, 4}) == 24u);
  CHECK(row_major_numel(std::vector<std::int64_t>{0, 5}) == 0u);
  CHECK(row_major_numel(std::vector<std::uint64_t>{kInt64Max}) == kInt64Max);
  CHECK(row_major_numel(std::vector<std::uint64_t>{0, kInt64Max, 1}) == 0u);
  // Empty, but its strides would not fit: (0, 2^40, 2^40).
  CHECK_FALSE(row_major_numel(std::vector<std::uint64_t>{0, 1ULL << 40, 1ULL << 40}));
  CHECK_FALSE(row_major_numel(std::vector<std::uint64_t>{1ULL << 62, 2}));
  CHECK_FALSE(row_major_numel(std::vector<std::uint64_t>{kInt64Max + 1}));
  CHECK_FALSE(row_major_numel(std::vector<std::uint64_t>{1ULL << 32, 1ULL << 32, 0}));
}

TEST_CASE("common: fits never overflows") {
  CHECK(fits(0, 10, 10));
  CHECK(fits(10, 0, 10));
  CHECK_FALSE(fits(11, 0, 10));
  CHECK_FALSE(fits(5, 6, 10));
  CHECK_FALSE(fits(1, kMax, 10));
  CHECK_FALSE(fits(kMax, kMax, kMax - 1));
}
