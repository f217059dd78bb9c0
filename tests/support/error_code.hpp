// Test helper: what a callable throws — its pthload::Errc, the pthload::Error itself with its
// context (path, record, offset, opcode), or a failed test case when it throws nothing.
#pragma once

#include <doctest/doctest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <pthload/error.hpp>

namespace pthload::test {

/// The code of the pthload::Error `f` throws, or kOk when it throws nothing.
template <typename F>
Errc error_code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return Errc::kOk;
}

/// The pthload::Error `f` throws, or nullopt when it throws nothing.
template <typename F>
std::optional<Error> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

/// The `E` (a pthload::Error or one of its kinds: FormatError, IoError, ...) that `f` must throw,
/// for the test to check its code(), context() and what(). Fails the test case when `f` returns,
/// or throws a pthload::Error of another kind.
template <typename E = Error, typename F>
E error_thrown(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    if constexpr (std::is_same_v<E, Error>) {
      return e;
    } else {
      if (const auto* kind = dynamic_cast<const E*>(&e)) return *kind;
      FAIL("threw a pthload::Error of another kind: " << std::string(e.what()));
    }
  }
  FAIL("no pthload::Error was thrown");
  throw std::logic_error("unreachable: FAIL throws");
}

}  // namespace pthload::test
