// common/check.hpp: one-line checks build their error only on failure, and with_context adds
// only what an error lacks.
#include <doctest/doctest.h>

#include <string>

#include "common/check.hpp"
#include "pthload/error.hpp"
#include "support/error_code.hpp"

using pthload::Errc;
using pthload::FormatError;
using pthload::UnsupportedError;
using pthload::test::error_thrown;
namespace common = pthload::common;

TEST_CASE("common: check makes its error only when the condition fails") {
  int made = 0;
  const auto make = [&] {
    ++made;
    return UnsupportedError(Errc::kZipEncrypted, "encrypted");
  };
  common::check(true, make);
  CHECK(made == 0);
  CHECK_THROWS_AS(common::check(false, make), UnsupportedError);
  CHECK(made == 1);
}

TEST_CASE("common: require_format throws a FormatError with the formatted message") {
  CHECK_NOTHROW(common::require_format(true, Errc::kZipRecordNotFound, "no {}", "record"));
  const auto e = error_thrown<FormatError>([&] {
    common::require_format(false, Errc::kZipRecordNotFound, "no record {} of {}", "a", 2);
  });
  CHECK(e.code() == Errc::kZipRecordNotFound);
  CHECK(e.message() == "no record a of 2");
}

TEST_CASE("common: with_context returns the body's value and fills only missing fields") {
  CHECK(common::with_context({.path = "p.pt"}, [] { return 7; }) == 7);
  const auto e = error_thrown<FormatError>([&] {
    common::with_context({.path = "p.pt", .record = "outer", .offset = 9, .opcode = 0x51}, [] {
      throw FormatError(Errc::kZipRecordNotFound, "inner", {.record = "inner", .offset = 3});
    });
  });
  CHECK(e.context().path == "p.pt");     // missing: added
  CHECK(e.context().record == "inner");  // said by the lower layer: kept
  CHECK(e.context().offset == 3);        // kept
  CHECK(e.context().opcode == 0x51);     // missing: added
  CHECK(std::string(e.what()).find("p.pt") != std::string::npos);
}
