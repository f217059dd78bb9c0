// The printer: Python-like literals, layout, shared and cyclic nodes, caps.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <string_view>

#include "pickle_test_support.hpp"

using namespace std::literals;
using pthload::pickle::PrintOptions;
using pthload::pickle::test::printed;
using pthload::pickle::test::run;

TEST_CASE("pickle: the printer writes scalars as Python's repr") {
  CHECK(printed("F1e+16\n."sv) == "1e+16");
  CHECK(printed("F1e15\n."sv) == "1000000000000000.0");
  CHECK(printed("F0.0001\n."sv) == "0.0001");
  CHECK(printed("F1e-05\n."sv) == "1e-05");
  CHECK(printed("F-0.0\n."sv) == "-0.0");
  CHECK(printed("X\x04\x00\x00\x00"
                "a'\"\t."sv) == "'a\\'\"\\t'");
  CHECK(printed("X\x02\x00\x00\x00\x01\x7f."sv) == "'\\x01\\x7f'");
  CHECK(printed("X\x02\x00\x00\x00\xc2\x85."sv) == "'\\x85'");
  CHECK(printed("C\x03\x00'\\."sv) == "b\"\\x00'\\\\\"");
  CHECK(printed("\x8a\x00."sv) == "0");
}

TEST_CASE("pickle: big ints print in decimal, huge ones in hex") {
  std::string huge = "\x8b\x00\x08\x00\x00"s;  // 2048 bytes
  huge += std::string(2047, '\0') + "\x01."s;
  PrintOptions whole;
  whole.max_string = SIZE_MAX;
  const auto text = printed(huge, whole);
  CHECK(text.starts_with("0x1"));
  CHECK(text.size() == 2 + 1 + 2047 * 2);
  // Cut at max_string characters, as strings are.
  const auto cut = printed(huge);
  CHECK(cut.size() == PrintOptions{}.max_string + 3);
  CHECK(cut.starts_with("0x1"));
  CHECK(cut.ends_with("00..."));
  std::string negative = "\x8b\x00\x08\x00\x00"s + std::string(2047, '\0') + "\xff."s;
  CHECK(printed(negative).starts_with("-0x1"));
}

TEST_CASE("pickle: small containers print on one line, larger ones indented") {
  CHECK(printed("(K\x01K\x02"
                "d."sv) == "{1: 2}");
  std::string big = "(";
  for (int i = 0; i < 20; ++i)
    big += "K\x01";
  big += "l.";
  CHECK(printed(big) == "[\n" + [] {
    std::string lines;
    for (int i = 0; i < 20; ++i)
      lines += "  1,\n";
    return lines;
  }() + "]");
  PrintOptions options;
  options.indent = 4;
  options.inline_values = 1;
  CHECK(printed("K\x01\x85."sv, options) == "(\n    1,\n)");
  CHECK(printed("(K\x01K\x02"
                "d."sv,
                options) == "{\n    1: 2,\n}");
}

TEST_CASE("pickle: shared nodes print once, then as references; cycles are marked") {
  CHECK(printed("(]q\x00h\x00l."sv) == "[#1=[], <ref #1>]");
  CHECK(printed("]q\x00h\x00"
                "a."sv) == "#1=[<cycle #1>]");
  CHECK(printed("}q\x00K\x01h\x00s."sv) == "#1={1: <cycle #1>}");
  // Scalars and globals shared through the memo print in full each time, and so do the
  // tuples of small ints the arena shares (pickle::Value::is_shared_constant).
  CHECK(printed("(X\x01\x00\x00\x00"
                "aq\x00h\x00l."sv) == "['a', 'a']");
  CHECK(printed("(K\x04\x85K\x04\x85l."sv) == "[(4,), (4,)]");
  // Two lists that hold each other.
  CHECK(printed("]q\x00]q\x01h\x00"
                "a0h\x01"
                "a."sv) == "#1=[[<cycle #1>]]");
}

TEST_CASE("pickle: depth, item and string caps") {
  PrintOptions options;
  options.max_depth = 1;
  CHECK(printed("K\x01\x85\x85\x85."sv, options) == "((...,),)");
  options = {};
  options.max_items = 2;
  CHECK(printed("(K\x01K\x02K\x03K\x04l."sv, options) == "[1, 2, ... (2 more)]");
  CHECK(printed("(K\x01K\x02K\x03K\x04"
                "d."sv,
                options) == "{1: 2, 3: 4}");
  CHECK(printed("(K\x01K\x02K\x03K\x04K\x05K\x06"
                "d."sv,
                options) == "{1: 2, 3: 4, ... (1 more)}");
  // BUILD states are all printed whatever max_items says, so they are all looked at for sharing:
  // a list whose state is itself printed itself forever when max_items hid the state from the
  // first pass (found by fuzz_print; fuzz/regressions/print).
  options = {};
  options.max_items = 0;
  CHECK(printed("]2b."sv, options) == "#1=[] state=<cycle #1>");
  CHECK(printed("]2b."sv) == "#1=[] state=<cycle #1>");
  options = {};
  options.max_string = 3;
  CHECK(printed("X\x05\x00\x00\x00"
                "abcde."sv,
                options) == "'abc'...");
  CHECK(printed("C\x05"
                "abcde."sv,
                options) == "b'abc'...");
}

TEST_CASE("pickle: calls print with items, keyword arguments and states") {
  CHECK(printed("cm\nf\n)\x81}(U\x01"
                "aK\x01ub."sv) == "m.f() state={'a': 1}");
  CHECK(printed("cm\nf\n)\x81\x8f"
                "b."sv) == "m.f() state=set()");
  CHECK(printed("cm\nf\n(K\x01tRK\x02\x85R."sv) == "m.f(1)(2)");
  CHECK(printed("(]q\x00h\x00\x85l."sv) == "[#1=[], (<ref #1>,)]");
}

TEST_CASE("pickle: printing to a stream gives the same text") {
  std::string pickle = "(";
  for (int i = 0; i < 30000; ++i)
    pickle += "K\x07";
  pickle += "l.";
  const auto r = run(pickle);
  std::ostringstream out;
  print(out, *r.root);
  CHECK(out.str() == print(*r.root));
  CHECK(out.str().size() > 1 << 16);
}

TEST_CASE("pickle: key_text with a bound refuses longer keys, unbuilt") {
  using pthload::pickle::key_text;
  const auto text_of = [](std::string_view pickle, std::size_t max_bytes) {
    const auto r = run(pickle);
    return key_text(*r.root, max_bytes);
  };
  CHECK(text_of("X\x05\x00\x00\x00"
                "abcde."sv,
                5) == "abcde");
  CHECK(text_of("X\x05\x00\x00\x00"
                "abcde."sv,
                4) == std::nullopt);
  // ('ab', 1) is 9 bytes of text.
  CHECK(text_of("X\x02\x00\x00\x00"
                "abK\x01\x86."sv,
                9) == "('ab', 1)");
  CHECK(text_of("X\x02\x00\x00\x00"
                "abK\x01\x86."sv,
                8) == std::nullopt);
  // A wide tuple of long strings is refused (its bound is met within the first few strings).
  std::string wide = "(";
  for (int i = 0; i < 1000; ++i)
    wide +=
        "X\x05\x00\x00\x00"
        "abcde"s;
  CHECK(text_of(wide + "t.", 64) == std::nullopt);
  // At the bound exactly, for bytes as for str: b'ab' is 5 bytes of text.
  CHECK(text_of("C\x02"
                "ab."sv,
                5) == "b'ab'");
  CHECK(text_of("C\x02"
                "ab."sv,
                4) == std::nullopt);
  CHECK(key_text(*run(wide + "t.").root)->size() > 64);
}

TEST_CASE("pickle: a cut print looks only at what it shows") {
  PrintOptions options;
  options.max_string = 3;
  // The quote is chosen for the bytes shown ('abc'), not for the quote further on.
  CHECK(printed("X\x05\x00\x00\x00"
                "abcd'."sv,
                options) == "'abc'...");
  // A Python 2 str is text when what is shown is UTF-8, whatever follows the cut.
  CHECK(printed("U\x05"
                "abc\xff\xff."sv,
                options) == "'abc'...");
  CHECK(printed("U\x02"
                "a\xff."sv,
                options) == "b'a\\xff'");
  // A character the cut falls in is checked whole: F0 80 is no character, so this is bytes
  // (written as a str, its quote would have come out unescaped).
  options.max_string = 10;
  CHECK(printed("U\x17"
                "aaaaaaaaa\xf0\x80'Xbbbbbbbbbb."sv,
                options) == "b'aaaaaaaaa\\xf0'...");
  options.max_string = 3;
  // A cut inside a valid character shows it whole.
  CHECK(printed("U\x06"
                "ab\xc3\xa9zz."sv,
                options) == "'ab\xc3\xa9'...");
  // An int's digits are cut likewise (2^64, past int64: a big int).
  CHECK(printed("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."sv, options) == "184...");
  CHECK(printed("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."sv) == "18446744073709551616");
}
