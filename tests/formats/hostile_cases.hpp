// Test helper: a hostile input built in a test, the outcome it must have, and running a list of
// them, each in its own guarded child (hostile_guard.hpp) so a crash or hang names the case.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pthload/error.hpp>

#include "formats/hostile_guard.hpp"
#include "formats/hostile_load_outcome.hpp"

namespace pthload::test::hostile {

/// What a case must end in: a specific code, any pthload::Error (where the code depends on
/// which check runs first and both are right), or either a load or an error.
struct Expect {
  enum class Kind { kCode, kSomeError, kLoadOrError };
  Kind kind = Kind::kSomeError;
  Errc code = Errc::kOk;
};
inline Expect code(Errc c) {
  return {Expect::Kind::kCode, c};
}
inline Expect some_error() {
  return {Expect::Kind::kSomeError};
}
inline Expect load_or_error() {
  return {Expect::Kind::kLoadOrError};
}

struct Case {
  std::string name;
  std::vector<std::byte> bytes;
  Expect expect;
  /// Memory allowed per input byte (guard::memory_bound); deflated inputs may expand 1032x.
  std::uint64_t bytes_per_input_byte = 64;
};

/// Runs `body` in a guarded child with `bounds` and records the result as a doctest check.
inline void check_guarded(const std::string& name, const guard::Bounds& bounds,
                          const guard::Body& body) {
  const auto result = guard::run(body, bounds);
  INFO(name << ": " << result.describe());
  CHECK(result.passed());
}

/// Each case in its own child, bounded by its own size.
inline void run_cases(const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    auto bounds = guard::bounds_for(c.bytes.size());
    bounds.memory_bytes = guard::memory_bound(0) +
                          c.bytes_per_input_byte * static_cast<std::uint64_t>(c.bytes.size());
    check_guarded(c.name, bounds, [&](guard::SharedReport& report) {
      report.at(c.name);
      switch (c.expect.kind) {
        case Expect::Kind::kCode:
          expect_error(c.bytes, c.expect.code);
          break;
        case Expect::Kind::kSomeError:
          expect_some_error(c.bytes);
          break;
        case Expect::Kind::kLoadOrError:
          expect_load_or_error(c.bytes);
          break;
      }
    });
  }
}

}  // namespace pthload::test::hostile
