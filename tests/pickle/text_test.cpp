// Text argument decoding: decimals, floats, STRING escapes, raw-unicode-escape, UTF-8.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "pickle/text.hpp"

using namespace std::literals;
namespace text = pthload::pickle::text;

TEST_CASE("pickle: parse_decimal") {
  CHECK(text::parse_decimal("0")->value == 0);
  CHECK(text::parse_decimal("+17")->value == 17);
  CHECK(text::parse_decimal("-9223372036854775808")->value == INT64_MIN);
  CHECK(text::parse_decimal("9223372036854775807")->big.empty());
  const auto big = text::parse_decimal("9223372036854775808");
  REQUIRE(big);
  CHECK(big->big.size() == 9);  // 0x80 00.. then a zero sign byte
  CHECK(std::to_integer<int>(big->big[7]) == 0x80);
  const auto negative = text::parse_decimal("-18446744073709551616");
  REQUIRE(negative);
  CHECK(std::to_integer<int>(negative->big.back()) == 0xff);
  CHECK_FALSE(text::parse_decimal(""));
  CHECK_FALSE(text::parse_decimal("-"));
  CHECK_FALSE(text::parse_decimal("1 "));
  CHECK_FALSE(text::parse_decimal(std::string(4301, '1')));
  CHECK(text::parse_decimal(std::string(4300, '1')));
}

TEST_CASE("pickle: parse_float") {
  CHECK(*text::parse_float("1.5") == 1.5);
  CHECK(*text::parse_float("+2") == 2.0);
  CHECK(*text::parse_float("-1e3") == -1000.0);
  CHECK(std::isinf(*text::parse_float("Infinity")));
  CHECK(std::isnan(*text::parse_float("-NaN")));
  CHECK(*text::parse_float("1e-999") == 0.0);
  CHECK_FALSE(text::parse_float(""));
  CHECK_FALSE(text::parse_float("+"));
  CHECK_FALSE(text::parse_float("1e999"));
  CHECK_FALSE(text::parse_float("0x10"));
  CHECK_FALSE(text::parse_float("nan(1)"));
  CHECK_FALSE(text::parse_float("1..2"));
}

TEST_CASE("pickle: unescape_string follows codecs.escape_decode") {
  CHECK(*text::unescape_string("a\\\\b\\'\\\"") == "a\\b'\"");
  CHECK(*text::unescape_string("\\a\\b\\f\\n\\r\\t\\v") == "\a\b\f\n\r\t\v");
  CHECK(*text::unescape_string("x\\\ny") == "xy");
  CHECK(*text::unescape_string("\\0\\101\\777\\8\\q") == "\0A\xff\\8\\q"s);
  CHECK(*text::unescape_string("\\x41\\xfF") == "A\xff");
  CHECK_FALSE(text::unescape_string("\\"));
  CHECK_FALSE(text::unescape_string("\\x4"));
  CHECK_FALSE(text::unescape_string("\\x4g"));
}

TEST_CASE("pickle: raw-unicode-escape") {
  bool surrogates = false;
  CHECK(*text::decode_raw_unicode_escape("\\u0041\\\\u0041\\\\\\u0041", surrogates) ==
        "A\\\\u0041\\\\A");
  CHECK(*text::decode_raw_unicode_escape("\\x41\\", surrogates) == "\\x41\\");
  CHECK(*text::decode_raw_unicode_escape("\xff", surrogates) == "\xc3\xbf");
  CHECK_FALSE(surrogates);
  CHECK(*text::decode_raw_unicode_escape("\\udfff", surrogates) == "\xed\xbf\xbf");
  CHECK(surrogates);
  CHECK(*text::decode_raw_unicode_escape("\\U0010ffff", surrogates) == "\xf4\x8f\xbf\xbf");
  CHECK_FALSE(text::decode_raw_unicode_escape("\\U00110000", surrogates));
  CHECK_FALSE(text::decode_raw_unicode_escape("\\u12", surrogates));
  CHECK_FALSE(text::decode_raw_unicode_escape("\\u12x4", surrogates));
}

TEST_CASE("pickle: check_utf8") {
  CHECK(text::check_utf8("plain ascii text, long enough for words") == text::Utf8::kValid);
  CHECK(text::check_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") == text::Utf8::kValid);
  CHECK(text::check_utf8("\xed\x9f\xbf") == text::Utf8::kValid);
  CHECK(text::check_utf8("\xed\xa0\x80") == text::Utf8::kValidWithSurrogates);
  for (const auto bad :
       {"\x80"sv, "\xc1\xbf"sv, "\xe0\x9f\xbf"sv, "\xf0\x8f\xbf\xbf"sv, "\xf4\x90\x80\x80"sv,
        "\xf5\x80\x80\x80"sv, "\xc3"sv, "\xe2\x82"sv, "\xf0\x9f\x98"sv, "\xc3\x41"sv}) {
    CHECK(text::check_utf8(bad) == text::Utf8::kInvalid);
  }
}

TEST_CASE("pickle: is_ascii finds a high byte at any place in text of any length") {
  for (std::size_t length = 0; length <= 24; ++length) {
    const std::string ascii(length, 'a');
    CHECK(text::is_ascii(ascii));
    for (std::size_t at = 0; at < length; ++at) {
      std::string text = ascii;
      text[at] = '\x80';
      CAPTURE(length);
      CAPTURE(at);
      CHECK_FALSE(text::is_ascii(text));
      CHECK(text::check_utf8(text) == text::Utf8::kInvalid);
    }
  }
  CHECK(text::is_ascii("\x7f\x00\x01 spaces and \n newlines"sv));
  CHECK_FALSE(text::is_ascii("caf\xc3\xa9"sv));
}
