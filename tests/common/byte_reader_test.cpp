#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/byte_reader.hpp"
#include "support/error_code.hpp"

using pthload::Errc;
using pthload::common::ByteReader;
using pthload::test::error_thrown;

namespace {
constexpr std::array<std::byte, 8> kBytes{std::byte{0x01}, std::byte{0x02}, std::byte{0x03},
                                          std::byte{0x04}, std::byte{0x05}, std::byte{0x06},
                                          std::byte{0x07}, std::byte{0x08}};
}

TEST_CASE("common: ByteReader reads both byte orders") {
  ByteReader reader(kBytes, Errc::kZipLocalHeaderInvalid);
  CHECK(reader.le<std::uint16_t>("a") == 0x0201);
  CHECK(reader.be<std::uint16_t>("b") == 0x0304);
  CHECK(reader.le<std::uint32_t>("c") == 0x08070605u);
  CHECK(reader.remaining() == 0);
  reader.seek(0, "start");
  CHECK(reader.be<std::uint64_t>("d") == 0x0102030405060708ull);
}

TEST_CASE("common: ByteReader throws the given code with the file offset on truncation") {
  ByteReader reader{std::span{kBytes}.subspan(4), Errc::kZipLocalHeaderInvalid, 100};
  reader.skip(2, "prefix");
  const auto e =
      error_thrown<pthload::FormatError>([&] { (void)reader.le<std::uint32_t>("field"); });
  CHECK(e.code() == Errc::kZipLocalHeaderInvalid);
  REQUIRE(e.context().offset.has_value());
  CHECK(*e.context().offset == 102);
  CHECK(pthload::test::error_code_of([&] { reader.seek(5, "past end"); }) ==
        Errc::kZipLocalHeaderInvalid);
}
