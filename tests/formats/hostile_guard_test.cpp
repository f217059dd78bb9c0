// The guard itself: each way a child can end is seen and named by the parent, so a passing
// hostile case means what it says.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "formats/hostile_guard.hpp"

namespace guard = pthload::test::guard;
using Kind = guard::Result::Kind;

namespace {

guard::Bounds short_bounds() {
  guard::Bounds bounds;
  bounds.wall = std::chrono::seconds(1);
  bounds.memory_bytes = std::uint64_t{64} << 20;
  return bounds;
}

}  // namespace

TEST_SUITE_BEGIN("hostile");

TEST_CASE("formats hostile guard: a case that returns passes") {
  const auto result =
      guard::run([](guard::SharedReport& report) { report.at("nothing"); }, short_bounds());
  CHECK(result.kind == Kind::kPassed);
}

TEST_CASE("formats hostile guard: a wrong outcome fails with its message and input") {
  const auto result = guard::run(
      [](guard::SharedReport& report) {
        report.at("input 7");
        throw guard::CaseFailure("expected ZipRecordOutOfBounds");
      },
      short_bounds());
  CHECK(result.kind == Kind::kFailed);
  CHECK(result.label == "input 7");
  CHECK(result.message == "expected ZipRecordOutOfBounds");
}

TEST_CASE("formats hostile guard: an exception that is no pthload::Error is reported") {
  const auto result =
      guard::run([](guard::SharedReport&) { throw std::logic_error("not ours"); }, short_bounds());
  CHECK(result.kind == Kind::kOtherException);
}

TEST_CASE("formats hostile guard: a crash is reported with the input it was on") {
  const auto result = guard::run(
      [](guard::SharedReport& report) {
        report.at("input 3");
        std::abort();
      },
      short_bounds());
  CHECK(result.kind == Kind::kCrashed);
  CHECK(result.label == "input 3");
}

TEST_CASE("formats hostile guard: a hang is ended by the wall-clock bound") {
  const auto start = std::chrono::steady_clock::now();
  const auto result = guard::run(
      [](guard::SharedReport&) {
        volatile bool forever = true;
        while (forever) {
        }
      },
      short_bounds());
  CHECK(result.kind == Kind::kTimedOut);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(8));
}

TEST_CASE("formats hostile guard: an allocation past the memory bound is reported") {
  // 256 MiB, touched, against a bound of 64 MiB: RLIMIT_AS refuses it, or (ASan) the peak
  // resident set shows it. Touching 256 MiB under ASan takes longer than short_bounds' second.
  auto bounds = short_bounds();
  bounds.wall = std::chrono::seconds(20);
  const auto result = guard::run(
      [](guard::SharedReport&) {
        const std::size_t size = std::size_t{256} << 20;
        const auto block = std::make_unique<char[]>(size);
        // Volatile writes, one per page: the compiler may not elide the block or its pages.
        volatile char* pages = block.get();
        for (std::size_t at = 0; at < size; at += 4096)
          pages[at] = 1;
      },
      bounds);
  CHECK(result.kind == Kind::kOverMemory);
}

TEST_SUITE_END();
