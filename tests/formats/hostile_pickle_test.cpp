// Hostile data.pkl records inside a valid zip checkpoint, loaded under the default limits: a
// million nested containers, memo bombs, lengths of 2^63, 2^64-1 and 2^32-1, and shared nodes
// that make the naming walk exponential.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "formats/hostile_cases.hpp"
#include "support/checkpoint_file.hpp"
#include "support/pickle_writer.hpp"

using namespace std::literals;
using pthload::Errc;
using pthload::test::float_record;
using pthload::test::PickleWriter;
using namespace pthload::test::hostile;

namespace {

constexpr int kMillion = 1'000'000;
constexpr int kListItems = 300'000;

/// A zip checkpoint whose data.pkl is `pickle` (stored, as torch writes it), with one 8-float
/// storage '0' for the pickles that refer to it.
std::vector<std::byte> checkpoint_with(const std::string& pickle) {
  return pthload::test::checkpoint_archive(pickle, {{.name = "ck/data/0", .data = float_record(8)}})
      .bytes;
}

std::string repeat(std::string_view piece, int times) {
  std::string out;
  out.reserve(piece.size() * static_cast<std::size_t>(times));
  for (int i = 0; i < times; ++i)
    out += piece;
  return out;
}

std::string le(std::uint64_t value, int width) {
  std::string out;
  for (int i = 0; i < width; ++i)
    out += static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

const std::string kProto = "\x80\x02";
const std::string kProto4 = "\x80\x04";

}  // namespace

TEST_SUITE_BEGIN("hostile");

TEST_CASE("formats hostile: a million nested containers hit max_pickle_nesting") {
  const auto nesting = code(Errc::kPickleLimitExceeded);
  std::vector<Case> cases;
  // [[[...]]]: EMPTY_LIST a million times, then APPEND each into the one below.
  cases.push_back(
      {"nested lists (EMPTY_LIST + APPEND)",
       checkpoint_with(kProto + repeat("]", kMillion) + repeat("a", kMillion - 1) + "."), nesting});
  // The same with MARK ... APPENDS, as pickle writes batched lists.
  cases.push_back({"nested lists (EMPTY_LIST + MARK ... APPENDS)",
                   checkpoint_with(kProto + repeat("](", kMillion) + repeat("e", kMillion) + "."),
                   nesting});
  // ((((...)))): MARK a million times, then TUPLE closes each.
  cases.push_back(
      {"nested tuples (MARK ... TUPLE)",
       checkpoint_with(kProto + repeat("(", kMillion) + "N" + repeat("t", kMillion) + "."),
       nesting});
  cases.push_back({"nested tuples (TUPLE1)",
                   checkpoint_with(kProto + "N" + repeat("\x85", kMillion) + "."), nesting});
  // {'k': {'k': ...}}: EMPTY_DICT and a key a million times, then SETITEM each into its parent.
  cases.push_back({"nested dicts (EMPTY_DICT + SETITEM)",
                   checkpoint_with(kProto + repeat("}X\x01\x00\x00\x00k"s, kMillion) + "}" +
                                   repeat("s", kMillion) + "."),
                   nesting});
  run_cases(cases);
}

TEST_CASE("formats hostile: memo bombs") {
  std::vector<Case> cases;
  // A 300 000-element list, memoised, then fetched 300 000 times into another list: 9 * 10^10
  // paths for the naming walk, which its step budget (8 per pickle byte) must stop. (A million
  // by a million is stopped the same way, but takes minutes under ASan.)
  cases.push_back({"a 300 000-element list GETed 300 000 times",
                   checkpoint_with(kProto + "](" + repeat("N", kListItems) + "eq\x00"s + "0](" +
                                   repeat("h\x00"s, kListItems) + "e."),
                   code(Errc::kTorchLimitExceeded)});
  // The same with a dict of 300 000 entries and a set of 300 000 members: the entries and
  // members the walk skips (they hold no tensor) still cost it a step each.
  cases.push_back({"a 300 000-entry dict GETed 300 000 times",
                   checkpoint_with(kProto + "}(" + repeat("NN", kListItems) + "uq\x00"s + "0](" +
                                   repeat("h\x00"s, kListItems) + "e."),
                   code(Errc::kTorchLimitExceeded)});
  cases.push_back({"a 300 000-member set GETed 300 000 times",
                   checkpoint_with(kProto + "\x8f(" + repeat("N", kListItems) + "\x90q\x00"s +
                                   "0](" + repeat("h\x00"s, kListItems) + "e."),
                   code(Errc::kTorchLimitExceeded)});
  // A small value fetched until the stack limit: 17 Mi GETs against max_pickle_stack (16 M).
  cases.push_back({"None GETed 17 million times",
                   checkpoint_with(kProto + "Nq\x00"s + repeat("h\x00"s, 17 * (1 << 20)) + "."),
                   code(Errc::kPickleLimitExceeded)});
  // DUP past the stack limit.
  cases.push_back({"DUP 17 million times",
                   checkpoint_with(kProto + "N" + repeat("2", 17 << 20) + "."),
                   code(Errc::kPickleLimitExceeded)});
  // LONG_BINPUT keys near 2^32: the memo must not be indexed by the key's value.
  cases.push_back({"LONG_BINPUT 0xffffffff then LONG_BINGET 0xfffffffe",
                   checkpoint_with(kProto + "Nr\xff\xff\xff\xffj\xfe\xff\xff\xff."),
                   code(Errc::kPickleMemoKeyMissing)});
  std::string huge_keys = kProto + "N";
  for (std::uint32_t i = 0; i < 100'000; ++i)
    huge_keys += "r" + le(0xFFFF'FFFFu - i * 40'000u, 4);
  cases.push_back({"100 000 LONG_BINPUTs spread over 2^32 keys", checkpoint_with(huge_keys + "."),
                   load_or_error()});
  // MEMOIZE (protocol 4) past max_pickle_memo: 17 Mi entries of one value.
  cases.push_back({"MEMOIZE 17 million times",
                   checkpoint_with(kProto4 + "N" + repeat("\x94", 17 << 20) + "."),
                   code(Errc::kPickleLimitExceeded)});
  run_cases(cases);
}

TEST_CASE("formats hostile: pickle lengths of 2^63, 2^64-1 and 2^32-1") {
  std::vector<Case> cases;
  const auto truncated = code(Errc::kPickleTruncated);
  for (const auto& [label, value] :
       {std::pair{"2^63", std::uint64_t{1} << 63}, std::pair{"2^64-1", ~std::uint64_t{0}},
        std::pair{"2^32-1", std::uint64_t{0xFFFF'FFFF}}}) {
    const std::string v = label;
    cases.push_back({"BINUNICODE8 length " + v,
                     checkpoint_with(kProto4 + "\x8d" + le(value, 8) + "abc."), truncated});
    cases.push_back({"BINBYTES8 length " + v,
                     checkpoint_with(kProto4 + "\x8e" + le(value, 8) + "abc."), truncated});
    cases.push_back({"BYTEARRAY8 length " + v,
                     checkpoint_with("\x80\x05\x96" + le(value, 8) + "abc."), truncated});
    cases.push_back(
        {"FRAME length " + v, checkpoint_with(kProto4 + "\x95" + le(value, 8) + "N."), truncated});
    if (value <= 0xFFFF'FFFF) {
      cases.push_back({"BINUNICODE length " + v,
                       checkpoint_with(kProto + "X" + le(value, 4) + "abc."), truncated});
      cases.push_back({"BINBYTES length " + v,
                       checkpoint_with("\x80\x03"
                                       "B" +
                                       le(value, 4) + "abc."),
                       truncated});
      // LONG4's length is signed: 0xffffffff is -1.
      cases.push_back({"LONG4 length " + v,
                       checkpoint_with(kProto + "\x8b" + le(value, 4) + "abc."),
                       code(Errc::kPickleBadArgument)});
      cases.push_back({"LONG4 length 2^31-1",
                       checkpoint_with(kProto + "\x8b" + le(0x7FFF'FFFF, 4) + "abc."), truncated});
    }
  }
  run_cases(cases);
}

TEST_CASE("formats hostile: shared nodes that make the naming walk exponential") {
  std::vector<Case> cases;
  {
    // 2^40 paths to one tensor through 80 values.
    PickleWriter p = pthload::test::shared_list_dag(40);
    cases.push_back({"a list DAG with 2^40 paths", checkpoint_with(p.stop().bytes()),
                     code(Errc::kTorchLimitExceeded)});
  }
  {
    // The same through REDUCE and BUILD: Li = __main__.Node() whose state is {'a': Li-1,
    // 'b': Li-1}; an object of an unknown class is named by its state.
    PickleWriter p;
    p.tensor_v2("FloatStorage", "0", 8, 0, {8}, {1}).put(0);
    for (int level = 1; level <= 40; ++level) {
      const auto previous = static_cast<std::uint8_t>(level - 1);
      p.op('0').global("__main__", "Node").empty_tuple().reduce();
      p.empty_dict().mark().str("a").get(previous).str("b").get(previous).setitems().build();
      p.put(static_cast<std::uint8_t>(level));
    }
    cases.push_back({"a REDUCE + BUILD chain with 2^40 paths", checkpoint_with(p.stop().bytes()),
                     code(Errc::kTorchLimitExceeded)});
  }
  run_cases(cases);
}

TEST_SUITE_END();
