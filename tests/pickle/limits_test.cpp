// Each pthload::Limits bound on the machine: exceeding it is kPickleLimitExceeded naming the
// limit, at the offending opcode.
#include <doctest/doctest.h>

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
