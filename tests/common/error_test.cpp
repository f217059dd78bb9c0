#include <doctest/doctest.h>

#include <string>

#include "pthload/error.hpp"

using pthload::Errc;

TEST_CASE("common: Error::what names path, record and offset") {
  pthload::FormatError e(Errc::kPickleUnknownOpcode, "pickle: unknown opcode 0xff",
                         {.offset = 0x1a2});
  CHECK(std::string(e.what()) == "offset 0x1a2: pickle: unknown opcode 0xff");
  e.context().record = "archive/data.pkl";
  e.context().path = "model.pt";
  CHECK(std::string(e.what()) == "model.pt: archive/data.pkl+0x1a2: pickle: unknown opcode 0xff");
  CHECK(e.message() == "pickle: unknown opcode 0xff");
}

TEST_CASE("common: every code has a name") {
  CHECK(pthload::errc_name(Errc::kZipCrcMismatch) == "ZipCrcMismatch");
  CHECK(pthload::errc_name(Errc::kPickleLimitExceeded) == "PickleLimitExceeded");
  CHECK(pthload::errc_name(static_cast<Errc>(99999)) == "Unknown");
}
