// Malformed pickles, one corruption per case: each is a FormatError (or UnsupportedError) with
// the code, the opcode's offset and byte, and a message naming the opcode.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "pickle_test_support.hpp"

using namespace std::literals;
using pthload::Errc;
using pthload::pickle::test::run_error;

namespace {

struct Expected {
  Errc code;
  std::uint64_t offset;
  std::string_view message_part;
};

void check_error(std::string_view pickle, const Expected& expected) {
  const auto error = run_error(pickle);
  REQUIRE_MESSAGE(error.has_value(), "no error for ", std::string(pickle));
  CHECK(error->code() == expected.code);
  CHECK(error->context().offset == expected.offset);
  CHECK_MESSAGE(error->message().find(expected.message_part) != std::string::npos,
                error->message());
  CHECK(pthload::pickle::test::error_of([&] {
          try {
            (void)pthload::pickle::test::run(pickle);
          } catch (const pthload::FormatError&) {
            return;
          }
          throw pthload::Error(Errc::kOk, "not a FormatError");
        }) == std::nullopt);
}

}  // namespace

TEST_CASE("pickle: unknown opcode") {
  check_error("N\xff."sv, {Errc::kPickleUnknownOpcode, 1, "pickle: unknown opcode 0xff"});
  const auto error = run_error("N\xff."sv);
  CHECK(error->context().opcode == 0xff);
  CHECK(std::string(error->what()) == "offset 0x1: pickle: unknown opcode 0xff");
}

TEST_CASE("pickle: stack underflow in each popping opcode") {
  check_error("(e."sv, {Errc::kPickleStackUnderflow, 1, "pickle: stack underflow in APPENDS"});
  check_error("a."sv, {Errc::kPickleStackUnderflow, 0, "stack underflow in APPEND"});
  check_error(
      "N0"
      "0."sv,
      {Errc::kPickleStackUnderflow, 2, "stack underflow in POP"});
  check_error("2."sv, {Errc::kPickleStackUnderflow, 0, "stack underflow in DUP"});
  check_error("N\x86."sv, {Errc::kPickleStackUnderflow, 1, "stack underflow in TUPLE2"});
  check_error("}Ns."sv, {Errc::kPickleStackUnderflow, 2, "stack underflow in SETITEM"});
  check_error("NR."sv, {Errc::kPickleStackUnderflow, 1, "stack underflow in REDUCE"});
  check_error("Nb."sv, {Errc::kPickleStackUnderflow, 1, "stack underflow in BUILD"});
  check_error("Q."sv, {Errc::kPickleStackUnderflow, 0, "stack underflow in BINPERSID"});
  check_error("q\x00."sv, {Errc::kPickleStackUnderflow, 0, "stack underflow in BINPUT"});
  check_error("(o."sv, {Errc::kPickleStackUnderflow, 1, "stack underflow in OBJ"});
  check_error("N\x93."sv, {Errc::kPickleStackUnderflow, 1, "stack underflow in STACK_GLOBAL"});
  check_error("(\x90."sv, {Errc::kPickleStackUnderflow, 1, "stack underflow in ADDITEMS"});
  check_error("(u."sv, {Errc::kPickleStackUnderflow, 1, "stack underflow in SETITEMS"});
}

TEST_CASE("pickle: what lies below an open MARK is out of reach") {
  // _pickle.c's fence: APPEND cannot reach the list below the MARK.
  check_error(
      "](K\x01"
      "a."sv,
      {Errc::kPickleStackUnderflow, 4, "stack underflow in APPEND"});
  check_error("N(\x85."sv, {Errc::kPickleStackUnderflow, 2, "stack underflow in TUPLE1"});
  // Closing an inner MARK (TUPLE, POP_MARK, POP of a MARK) puts the outer one's fence back.
  check_error("N((t\x86."sv, {Errc::kPickleStackUnderflow, 4, "stack underflow in TUPLE2"});
  check_error("N((N1\x85."sv, {Errc::kPickleStackUnderflow, 5, "stack underflow in TUPLE1"});
  check_error("N((0\x85."sv, {Errc::kPickleStackUnderflow, 4, "stack underflow in TUPLE1"});
}

TEST_CASE("pickle: missing MARK") {
  check_error("Nt."sv, {Errc::kPickleMarkNotFound, 1, "no MARK for TUPLE"});
  check_error("]e."sv, {Errc::kPickleMarkNotFound, 1, "no MARK for APPENDS"});
  check_error("}u."sv, {Errc::kPickleMarkNotFound, 1, "no MARK for SETITEMS"});
  check_error("1."sv, {Errc::kPickleMarkNotFound, 0, "no MARK for POP_MARK"});
  check_error("l."sv, {Errc::kPickleMarkNotFound, 0, "no MARK for LIST"});
  check_error("d."sv, {Errc::kPickleMarkNotFound, 0, "no MARK for DICT"});
  check_error("\x91."sv, {Errc::kPickleMarkNotFound, 0, "no MARK for FROZENSET"});
  check_error("o."sv, {Errc::kPickleMarkNotFound, 0, "no MARK for OBJ"});
  check_error("ia\nb\n."sv, {Errc::kPickleMarkNotFound, 0, "no MARK for INST"});
  check_error("\x8f\x90."sv, {Errc::kPickleMarkNotFound, 1, "no MARK for ADDITEMS"});
}

TEST_CASE("pickle: missing memo key") {
  check_error("h\x05."sv, {Errc::kPickleMemoKeyMissing, 0, "memo key 5 not found in BINGET"});
  check_error("g3\n."sv, {Errc::kPickleMemoKeyMissing, 0, "memo key 3 not found in GET"});
  check_error("j\x00\x00\x01\x00."sv, {Errc::kPickleMemoKeyMissing, 0, "memo key 65536"});
  check_error("Nq\x01h\x00."sv, {Errc::kPickleMemoKeyMissing, 3, "memo key 0"});
}

TEST_CASE("pickle: truncated arguments") {
  check_error("J\x01\x02"sv,
              {Errc::kPickleTruncated, 0, "truncated BININT: needs 4 bytes, 2 remain"});
  check_error(
      "X\x05\x00\x00\x00"
      "ab"sv,
      {Errc::kPickleTruncated, 0, "truncated BINUNICODE"});
  check_error("\x8e\xff\xff\xff\xff\xff\xff\xff\xff"sv,
              {Errc::kPickleTruncated, 0, "truncated BINBYTES8"});
  check_error("\x95\x10\x00\x00\x00\x00\x00\x00\x00N."sv,
              {Errc::kPickleTruncated, 0, "truncated FRAME"});
  check_error("I12"sv, {Errc::kPickleTruncated, 0, "truncated INT: no end of line"});
  check_error("cos\nsys"sv, {Errc::kPickleTruncated, 0, "truncated GLOBAL"});
  check_error("G\x3f\xf0"sv, {Errc::kPickleTruncated, 0, "truncated BINFLOAT"});
  check_error("\x80"sv, {Errc::kPickleTruncated, 0, "truncated PROTO"});
}

TEST_CASE("pickle: STOP needs exactly one value and no open MARK") {
  check_error("."sv, {Errc::kPickleBadStop, 0, "STOP with 0 values"});
  check_error("NN."sv, {Errc::kPickleBadStop, 2, "STOP with 2 values"});
  check_error("N(."sv, {Errc::kPickleBadStop, 2, "STOP with an open MARK"});
}

TEST_CASE("pickle: trailing bytes after STOP, unless allowed") {
  check_error("N.N"sv, {Errc::kPickleTrailingBytes, 2, "1 trailing bytes after STOP"});
  pthload::pickle::RunOptions options;
  options.allow_trailing_bytes = true;
  const std::string_view pickle = "N.garbage"sv;
  CHECK(pthload::pickle::test::run(pickle, options).end_offset == 2);
}

TEST_CASE("pickle: input that ends before STOP") {
  check_error(""sv, {Errc::kPickleNoStop, 0, "input ended before STOP"});
  check_error("N"sv, {Errc::kPickleNoStop, 1, "input ended before STOP"});
}

TEST_CASE("pickle: bad protocol") {
  check_error("\x80\x06N."sv, {Errc::kPickleBadProtocol, 0, "unsupported protocol 6"});
}

TEST_CASE("pickle: invalid UTF-8") {
  check_error("X\x01\x00\x00\x00\xff."sv,
              {Errc::kPickleInvalidUtf8, 0, "invalid UTF-8 in BINUNICODE"});
  check_error("\x8c\x02\xc0\x80."sv,
              {Errc::kPickleInvalidUtf8, 0, "SHORT_BINUNICODE"});  // overlong
  check_error("\x8c\x04\xf4\x90\x80\x80."sv, {Errc::kPickleInvalidUtf8, 0, "SHORT_BINUNICODE"});
  check_error("c\xff\nx\n."sv, {Errc::kPickleInvalidUtf8, 0, "invalid UTF-8 in GLOBAL name"});
  check_error("(i\xc3\xa9\nx\n."sv, {Errc::kPickleInvalidUtf8, 1, "must be ASCII"});
  // GLOBAL decodes strictly: no surrogates there.
  check_error("c\xed\xa0\x80\nx\n."sv, {Errc::kPickleInvalidUtf8, 0, "GLOBAL"});
}

TEST_CASE("pickle: bad text arguments") {
  check_error("Iabc\n."sv, {Errc::kPickleBadArgument, 0, "invalid INT literal"});
  check_error("I010\n."sv, {Errc::kPickleBadArgument, 0, "invalid INT literal"});
  check_error("I0x10\n."sv, {Errc::kPickleBadArgument, 0, "invalid INT literal"});
  check_error("L1_0\n."sv, {Errc::kPickleBadArgument, 0, "invalid LONG literal"});
  check_error("F1.5x\n."sv, {Errc::kPickleBadArgument, 0, "invalid FLOAT literal"});
  check_error("F1e999\n."sv, {Errc::kPickleBadArgument, 0, "invalid FLOAT literal"});
  check_error("Sabc\n."sv, {Errc::kPickleBadArgument, 0, "must be quoted"});
  check_error("S'abc\"\n."sv, {Errc::kPickleBadArgument, 0, "must be quoted"});
  check_error("S'\\x4'\n."sv, {Errc::kPickleBadArgument, 0, "invalid escape in STRING"});
  check_error("V\\u004\n."sv, {Errc::kPickleBadArgument, 0, "raw-unicode-escape"});
  check_error("V\\U00110000\n."sv, {Errc::kPickleBadArgument, 0, "raw-unicode-escape"});
  check_error("Np-1\n."sv, {Errc::kPickleBadArgument, 1, "PUT argument out of range"});
  check_error("Npx\n."sv, {Errc::kPickleBadArgument, 1, "invalid PUT argument"});
  check_error("P\xc3\xa9\n."sv, {Errc::kPickleBadArgument, 0, "PERSID id must be ASCII"});
  check_error("T\xff\xff\xff\xff."sv,
              {Errc::kPickleBadArgument, 0, "negative byte count in BINSTRING"});
  check_error("\x8b\xff\xff\xff\xff."sv,
              {Errc::kPickleBadArgument, 0, "negative byte count in LONG4"});
}

TEST_CASE("pickle: type errors") {
  check_error(
      "K\x01K\x02"
      "a."sv,
      {Errc::kPickleTypeMismatch, 4, "cannot append to a int in APPEND"});
  check_error(
      "}(K\x01"
      "e."sv,
      {Errc::kPickleTypeMismatch, 4, "cannot append to a dict in APPENDS"});
  check_error("]K\x01K\x02s."sv,
              {Errc::kPickleTypeMismatch, 5, "cannot set items on a list in SETITEM"});
  check_error("}(K\x01u."sv, {Errc::kPickleBadArgument, 4, "odd number of items for SETITEMS"});
  check_error(
      "(K\x01"
      "d."sv,
      {Errc::kPickleBadArgument, 3, "odd number of items for DICT"});
  check_error("](K\x01\x90."sv,
              {Errc::kPickleTypeMismatch, 4, "cannot add items to a list in ADDITEMS"});
  check_error("cos\nsystem\n]R."sv, {Errc::kPickleTypeMismatch, 12,
                                     "the arguments must be a tuple, not a list in REDUCE"});
  check_error("K\x01)R."sv, {Errc::kPickleTypeMismatch, 3, "cannot call a int in REDUCE"});
  check_error("U\x01x)\x81."sv,
              {Errc::kPickleTypeMismatch, 4, "cannot call a python2-string in NEWOBJ"});
  check_error("cx\ny\n)]\x92."sv,
              {Errc::kPickleTypeMismatch, 7, "keyword arguments must be a dict"});
  check_error("K\x01K\x02\x93."sv, {Errc::kPickleTypeMismatch, 4, "module and name must be str"});
  check_error("K\x01}b."sv,
              {Errc::kPickleTypeMismatch, 3, "cannot set the state of a int in BUILD"});
  check_error(")}b."sv, {Errc::kPickleTypeMismatch, 2, "cannot set the state of a tuple"});
  check_error("(K\x01o."sv, {Errc::kPickleTypeMismatch, 3, "cannot call a int in OBJ"});
}

TEST_CASE("pickle: unhashable keys and set elements") {
  check_error(
      "(]K\x01"
      "d."sv,
      {Errc::kPickleUnhashableKey, 4, "unhashable list"});
  check_error("}]K\x01s."sv, {Errc::kPickleUnhashableKey, 4, "unhashable list"});
  check_error("}(}K\x01u."sv, {Errc::kPickleUnhashableKey, 5, "unhashable dict"});
  check_error("}(]\x85K\x01u."sv, {Errc::kPickleUnhashableKey, 6, "unhashable tuple"});
  check_error("\x8f(\x8f\x90."sv, {Errc::kPickleUnhashableKey, 3, "unhashable set"});
  check_error("(\x96\x00\x00\x00\x00\x00\x00\x00\x00\x91."sv,
              {Errc::kPickleUnhashableKey, 10, "unhashable bytearray"});
}

TEST_CASE("pickle: EXT, NEXT_BUFFER and READONLY_BUFFER are unsupported, clearly") {
  for (const auto pickle : {"\x82\x05."sv, "\x83\x05\x01."sv, "\x84\x05\x00\x00\x00."sv}) {
    const auto error = run_error(pickle);
    REQUIRE(error);
    CHECK(error->code() == Errc::kPickleUnsupportedOpcode);
    CHECK_THROWS_AS((void)pthload::pickle::test::run(pickle), pthload::UnsupportedError);
    CHECK(error->message().find("copyreg extension registry") != std::string::npos);
  }
  CHECK(run_error("\x82\x05."sv)->message().find("EXT1 is not supported: extension code 5") !=
        std::string::npos);
  CHECK(run_error("\x83\x05\x01."sv)->message().find("code 261") != std::string::npos);
  const auto next = run_error("\x97."sv);
  CHECK(next->code() == Errc::kPickleUnsupportedOpcode);
  CHECK(next->message().find("NEXT_BUFFER") != std::string::npos);
  const auto readonly = run_error("C\x01x\x98."sv);
  CHECK(readonly->code() == Errc::kPickleUnsupportedOpcode);
  CHECK(readonly->context().offset == 3);
  CHECK(run_error("\x82"sv)->code() == Errc::kPickleTruncated);
}

TEST_CASE("pickle: base_offset shifts reported offsets") {
  pthload::pickle::RunOptions options;
  options.base_offset = 1000;
  const auto error = run_error("N\xff."sv, {}, options);
  CHECK(error->context().offset == 1001);
}
