// Each pthload::Limits bound on the machine: exceeding it is kPickleLimitExceeded naming the
// limit, at the offending opcode.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>
#include <string_view>

#include "pickle_test_support.hpp"

using namespace std::literals;
using pthload::Errc;
using pthload::Limits;
using pthload::pickle::test::run;
using pthload::pickle::test::run_error;

namespace {
void check_limit(std::string_view pickle, const Limits& limits, std::string_view name,
                 std::uint64_t offset) {
  const auto error = run_error(pickle, limits);
  REQUIRE(error);
  CHECK(error->code() == Errc::kPickleLimitExceeded);
  CHECK_MESSAGE(error->message().find(name) != std::string::npos, error->message());
  CHECK(error->context().offset == offset);
}
}  // namespace

TEST_CASE("pickle: max_pickle_stack bounds values and marks on the stack") {
  Limits limits;
  limits.max_pickle_stack = 3;
  CHECK_NOTHROW((void)run("(NNNt."s, {}, limits));
  check_limit("(NNNNt.", limits, "limit max_pickle_stack (3) exceeded in NONE", 4);
  check_limit("((((N", limits, "max_pickle_stack", 3);
}

TEST_CASE("pickle: max_pickle_memo bounds memo entries, not keys") {
  Limits limits;
  limits.max_pickle_memo = 2;
  CHECK_NOTHROW((void)run("Nq\x00q\x01q\x00q\x01."s, {}, limits));
  check_limit("Nq\x00q\x01q\x02."sv, limits, "limit max_pickle_memo (2) exceeded in BINPUT", 5);
  check_limit("Nr\xff\xff\xff\xffr\xfe\xff\xff\xff\x94.", limits, "max_pickle_memo", 11);
}

TEST_CASE("pickle: max_pickle_nesting bounds container depth") {
  Limits limits;
  limits.max_pickle_nesting = 3;
  CHECK_NOTHROW((void)run("N\x85\x85\x85."s, {}, limits));
  check_limit("N\x85\x85\x85\x85.", limits, "limit max_pickle_nesting (3) exceeded in TUPLE1", 4);
  check_limit("]]]]aaa.", limits, "limit max_pickle_nesting (3) exceeded in APPEND", 6);
}

TEST_CASE("pickle: deep nesting far beyond the default fails cleanly, without recursion") {
  std::string pickle;
  for (int i = 0; i < 100'000; ++i)
    pickle += "]";
  for (int i = 0; i < 99'999; ++i)
    pickle += "a";
  pickle += ".";
  const auto error = run_error(pickle);
  REQUIRE(error);
  CHECK(error->code() == Errc::kPickleLimitExceeded);
  CHECK(error->message().find("max_pickle_nesting (10000)") != std::string::npos);
  Limits unlimited;
  unlimited.max_pickle_nesting = 1'000'000;
  const auto r = run(pickle, {}, unlimited);
  CHECK(r.root->depth() == 100'000);
  pthload::pickle::PrintOptions options;
  options.max_depth = 1'000'000;
  // Printed iteratively; indentation stops growing at 100 levels, so the text stays linear.
  const std::string text = print(*r.root, options);
  CHECK(text.starts_with("[\n  [\n    [\n"));
  CHECK(text.find("...") == std::string::npos);
  CHECK(text.size() < 100'000 * 410);
}

TEST_CASE("pickle: max_pickle_values bounds the values made") {
  Limits limits;
  limits.max_pickle_values = 3;
  CHECK_NOTHROW((void)run("(M\x00\x10M\x00\x11l."s, {}, limits));
  check_limit("(M\x00\x10M\x00\x11M\x00\x12M\x00\x13l."sv, limits,
              "limit max_pickle_values (3) exceeded in BININT2", 10);
  // Shared nodes cost nothing: DUP and GET push without making values, and ints from -5 to 256
  // are shared as in Python.
  CHECK_NOTHROW((void)run("(]2222l."s, {}, limits));
  const auto small = run("(K\x07K\x07J\xfb\xff\xff\xffJ\xfb\xff\xff\xffl."s, {}, limits);
  CHECK(small.root->items()[0] == small.root->items()[1]);
  CHECK(small.root->items()[2] == small.root->items()[3]);
  CHECK(small.root->items()[2]->as_int() == -5);
}

TEST_CASE("pickle: max_pickle_stack is exact across the stack's growth") {
  Limits limits;
  limits.max_pickle_stack = 1000;
  const std::string nones(1000, 'N');
  CHECK_NOTHROW((void)run("(" + nones + "l.", {}, limits));
  check_limit("(" + nones + "Nl.", limits, "limit max_pickle_stack (1000) exceeded in NONE", 1001);
  // Marks count apart: 1000 of them are allowed beside 1000 values.
  CHECK_NOTHROW(
      (void)run(std::string(1000, '(') + nones + std::string(1000, '1') + "N.", {}, limits));
  check_limit(std::string(1001, '('), limits, "max_pickle_stack", 1000);
}

TEST_CASE("pickle: max_pickle_values is reported at whichever opcode made the value") {
  struct Case {
    std::string_view pickle;  // the opcode at `offset` makes value number `made`
    std::size_t made;
    std::string_view opcode;
    std::uint64_t offset;
  };
  const Case cases[] = {
      {"I300\n."sv, 1, "INT", 0},
      {"L300\n."sv, 1, "LONG", 0},
      {"J\x00\x00\x01\x00."sv, 1, "BININT", 0},
      {"M\x00\x10."sv, 1, "BININT2", 0},
      {"\x8a\x02\x00\x10."sv, 1, "LONG1", 0},
      {"\x8b\x02\x00\x00\x00\x00\x10."sv, 1, "LONG4", 0},
      {"F1.5\n."sv, 1, "FLOAT", 0},
      {"G\x3f\xf8\x00\x00\x00\x00\x00\x00."sv, 1, "BINFLOAT", 0},
      {"S'a'\n."sv, 1, "STRING", 0},
      {"S'\\n'\n."sv, 1, "STRING", 0},
      {"T\x01\x00\x00\x00x."sv, 1, "BINSTRING", 0},
      {"U\x01x."sv, 1, "SHORT_BINSTRING", 0},
      {"Va\n."sv, 1, "UNICODE", 0},
      {"V\\u00e9\n."sv, 1, "UNICODE", 0},
      {"X\x01\x00\x00\x00x."sv, 1, "BINUNICODE", 0},
      {"X\x02\x00\x00\x00\xc3\xa9."sv, 1, "BINUNICODE", 0},
      {"\x8c\x01x."sv, 1, "SHORT_BINUNICODE", 0},
      {"\x8d\x01\x00\x00\x00\x00\x00\x00\x00x."sv, 1, "BINUNICODE8", 0},
      {"B\x01\x00\x00\x00x."sv, 1, "BINBYTES", 0},
      {"C\x01x."sv, 1, "SHORT_BINBYTES", 0},
      {"\x8e\x01\x00\x00\x00\x00\x00\x00\x00x."sv, 1, "BINBYTES8", 0},
      {"\x96\x01\x00\x00\x00\x00\x00\x00\x00x."sv, 1, "BYTEARRAY8", 0},
      {"N\x85."sv, 1, "TUPLE1", 1},
      {"NN\x86."sv, 1, "TUPLE2", 2},
      {"NNN\x87."sv, 1, "TUPLE3", 3},
      {"(Nt."sv, 1, "TUPLE", 2},
      {"]."sv, 1, "EMPTY_LIST", 0},
      {"(l."sv, 1, "LIST", 1},
      {"}."sv, 1, "EMPTY_DICT", 0},
      {"(d."sv, 1, "DICT", 1},
      {"\x8f."sv, 1, "EMPTY_SET", 0},
      {"(\x91."sv, 1, "FROZENSET", 1},
      {"cx\ny\n."sv, 1, "GLOBAL", 0},
      {"\x8c\x01x\x8c\x01y\x93."sv, 3, "STACK_GLOBAL", 6},
      {"cx\ny\n)R."sv, 2, "REDUCE", 6},
      {"cx\ny\n)\x81."sv, 2, "NEWOBJ", 6},
      {"cx\ny\n)}\x92."sv, 3, "NEWOBJ_EX", 7},
      {"(ix\ny\n."sv, 2, "INST", 1},
      {"(cx\ny\no."sv, 2, "OBJ", 6},
      {"Pab\n."sv, 2, "PERSID", 0},
      {"NQ."sv, 1, "BINPERSID", 1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.opcode);
    Limits limits;
    limits.max_pickle_values = c.made;
    CHECK_NOTHROW((void)run(c.pickle, {}, limits));
    limits.max_pickle_values = c.made - 1;
    check_limit(c.pickle, limits,
                fmt::format("limit max_pickle_values ({}) exceeded in {}", c.made - 1, c.opcode),
                c.offset);
  }
  // Values a persistent_load callback makes count as the opcode's.
  pthload::pickle::RunOptions options;
  options.persistent_load = [](const pthload::pickle::Value&, pthload::pickle::ValueArena& arena) {
    return arena.make_int(1000);
  };
  Limits limits;
  limits.max_pickle_values = 0;
  const auto error = run_error("NQ."sv, limits, options);
  REQUIRE(error);
  CHECK(error->message().find("max_pickle_values (0) exceeded in BINPERSID") != std::string::npos);
  // At the limit exactly, pushing what exists (GET, DUP, singletons, small ints) still works.
  limits.max_pickle_values = 3;
  const auto at_limit =
      run("](M\x00\x10q\x00M\x00\x11h\x00\x32NK\x05)\x88"
          "e."sv,
          {}, limits);
  CHECK(print(*at_limit.root) == "[4096, 4352, 4096, 4096, None, 5, (), True]");
}

TEST_CASE("pickle: max_pickle_memo is exact for a key in the dense part as beyond it") {
  Limits limits;
  limits.max_pickle_memo = 3;
  // Keys 0, 1, 2 grow the dense part to 4 slots; key 3 then has a slot, but no room.
  CHECK_NOTHROW((void)run("Nq\x00q\x01q\x02q\x01."sv, {}, limits));
  check_limit("Nq\x00q\x01q\x02q\x03."sv, limits, "limit max_pickle_memo (3) exceeded in BINPUT",
              7);
  check_limit("N\x94\x94\x94\x94."sv, limits, "limit max_pickle_memo (3) exceeded in MEMOIZE", 4);
}
