// bytes_of and spelling_of: protocol 2's spellings of bytes and bytearray, back to bytes.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "pickle/codecs.hpp"
#include "pickle_test_support.hpp"
#include "support/error_code.hpp"

using namespace std::literals;
using pthload::Errc;
using pthload::pickle::bytes_of;
using pthload::pickle::BytesSpelling;
using pthload::pickle::latin1_bytes;
using pthload::pickle::spelling_of;
using pthload::pickle::test::run;

TEST_CASE("pickle: bytes_of reads _codecs.encode(text, 'latin1') as CPython writes b'..'") {
  // pickle.dumps(b'\x00\xffab', 2)
  const auto r =
      run("\x80\x02"
          "c_codecs\nencode\nq\x00X\x05\x00\x00\x00\x00\xc3\xbf"
          "abq\x01X\x06"
          "\x00\x00\x00latin1q\x02\x86q\x03Rq\x04."sv);
  CHECK(bytes_of(*r.root) ==
        "\x00\xff"
        "ab"s);
}

TEST_CASE("pickle: bytes_of reads bytes(), bytearray(...) and real bytes") {
  CHECK(bytes_of(*run("\x80\x02"
                      "c__builtin__\nbytes\nq\x00)Rq\x01."sv)
                      .root) == "");
  // pickle.dumps(bytearray(b'ab'), 2)
  CHECK(bytes_of(*run("\x80\x02"
                      "c__builtin__\nbytearray\nq\x00"
                      "c_codecs\nencode\nq\x01X\x02\x00\x00"
                      "\x00"
                      "abq\x02X\x06\x00\x00\x00latin1q\x03\x86q\x04Rq\x05\x85q\x06Rq\x07."sv)
                      .root) == "ab");
  CHECK(bytes_of(*run("C\x02hi."sv).root) == "hi");
  CHECK(bytes_of(*run("\x96\x01\x00\x00\x00\x00\x00\x00\x00z."sv).root) == "z");
  CHECK(bytes_of(*run("cbuiltins\nbytearray\nX\x01\x00\x00\x00zX\x07\x00\x00\x00latin-1\x86R."sv)
                      .root) == "z");
  CHECK(bytes_of(*run("c_codecs\nencode\nX\x02\x00\x00\x00\xc3\xa9\x85R."sv).root) == "\xc3\xa9");
  CHECK(bytes_of(*run("c_codecs\nencode\nX\x02\x00\x00\x00\xc3\xa9X\x04\x00\x00\x00UTF8\x86R."sv)
                      .root) == "\xc3\xa9");
}

TEST_CASE("pickle: bytes_of is nullopt for anything else") {
  CHECK_FALSE(bytes_of(*run("N."sv).root));
  CHECK_FALSE(bytes_of(*run("X\x01\x00\x00\x00z."sv).root));
  CHECK_FALSE(bytes_of(*run("cos\nsystem\n)R."sv).root));
  CHECK_FALSE(bytes_of(*run("c_codecs\nencode\nK\x01\x85R."sv).root));
  CHECK_FALSE(bytes_of(*run("c_codecs\nencode\n)R."sv).root));
  CHECK_FALSE(bytes_of(*run("cbuiltins\nbytes\nK\x05\x85R."sv).root));
}

TEST_CASE("pickle: bytes_of rejects text the encoding cannot hold") {
  const auto r =
      run("c_codecs\nencode\nX\x03\x00\x00\x00\xe2\x82\xacX\x06\x00\x00\x00latin1\x86R."sv);
  CHECK(pthload::test::error_code_of([&] { (void)bytes_of(*r.root); }) == Errc::kPickleBadArgument);
  CHECK_THROWS_AS((void)bytes_of(*r.root), pthload::FormatError);
  const auto other =
      run("c_codecs\nencode\nX\x01\x00\x00\x00zX\x05\x00\x00\x00"
          "cp437\x86R."sv);
  CHECK_THROWS_AS((void)bytes_of(*other.root), pthload::UnsupportedError);
  const auto surrogate = run("c_codecs\nencode\nV\\ud800\n\x85R."sv);
  CHECK_THROWS_AS((void)bytes_of(*surrogate.root), pthload::FormatError);
}

TEST_CASE("pickle: spelling_of tells spellings of different bytes apart without decoding") {
  // [encode(s, 'latin1'), encode(s, 'LATIN_1'), encode(s, 'utf-8'), bytearray(encode(s, 'l1'))]
  // over one memoized s = 'é': latin1 e9 three times, utf-8 c3 a9 once. A reader that keyed
  // the bytes on s alone gave one of them the other's bytes.
  const auto r =
      run("](c_codecs\nencode\nq\x01X\x02\x00\x00\x00\xc3\xa9q\x00X\x06\x00\x00\x00latin1\x86R"
          "h\x01h\x00X\x07\x00\x00\x00LATIN_1\x86R"
          "h\x01h\x00X\x05\x00\x00\x00utf-8\x86R"
          "cbuiltins\nbytearray\nh\x01h\x00X\x02\x00\x00\x00l1\x86R\x85Re."sv);
  const auto items = r.root->items();
  REQUIRE(items.size() == 4);
  const auto latin1 = spelling_of(*items[0]);
  const auto utf8 = spelling_of(*items[2]);
  REQUIRE(latin1);
  REQUIRE(utf8);
  CHECK(latin1->form == BytesSpelling::Form::kLatin1);
  CHECK(utf8->form == BytesSpelling::Form::kUtf8);
  CHECK(latin1->source == utf8->source);
  CHECK(spelling_of(*items[1]) == latin1);
  CHECK(spelling_of(*items[3]) == latin1);
  CHECK_FALSE(latin1 == utf8);
  CHECK(bytes_of(*latin1) == "\xe9");
  CHECK(bytes_of(*utf8) == "\xc3\xa9");
  // Unknown encodings are refused when the spelling is read; bytes() spells no bytes at all.
  CHECK_THROWS_AS((void)spelling_of(*run("c_codecs\nencode\nX\x01\x00\x00\x00zX\x05\x00\x00\x00"
                                         "cp437\x86R."sv)
                                         .root),
                  pthload::UnsupportedError);
  const auto empty = spelling_of(*run("c__builtin__\nbytes\n)R."sv).root);
  REQUIRE(empty);
  CHECK(empty->form == BytesSpelling::Form::kEmpty);
  CHECK(bytes_of(*empty).empty());
}

TEST_CASE("pickle: latin1_bytes") {
  CHECK(latin1_bytes("a\xc2\x80\xc3\xbf") == "a\x80\xff");
  CHECK_FALSE(latin1_bytes("\xc4\x80"));
  CHECK_FALSE(latin1_bytes("\xc3"));
}
