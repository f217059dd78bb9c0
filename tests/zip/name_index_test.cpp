// NameIndex: the hash table of record names, its fallback to a sorted array when names are
// crafted to collide, and the repeat it reports; both forms must give the same answers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "support/zip_builder.hpp"
#include "zip/archive.hpp"
#include "zip/name_index.hpp"
#include "zip/zip_test_support.hpp"

using pthload::Errc;
using pthload::zip::Entry;
using pthload::zip::NameIndex;
namespace build = pthload::test::zip_build;

namespace {

// Entries named `names` (which must outlive them).
std::vector<Entry> entries_named(const std::vector<std::string>& names) {
  std::vector<Entry> entries;
  for (const std::string& name : names)
    entries.push_back({.name = name});
  return entries;
}

// 32-byte names that XXH3 (seed 0) gives one hash: bytes 0-7 and 16-23 equal its secret's
// bytes 0-7 and 16-23, so each 16-byte half is multiplied by zero (XXH3_mix16B) and only the
// length is left. What a hostile file would do to a hash table.
std::vector<std::string> colliding_names(std::size_t count) {
  const std::string secret_0_8 = "\xb8\xfe\x6c\x39\x23\xa4\x4b\xbe";
  const std::string secret_16_24 = "\xde\xd4\x6d\xe9\x83\x90\x97\xdb";
  std::vector<std::string> names;
  for (std::size_t i = 0; i < count; ++i) {
    // i in 16 decimal digits (not snprintf "%016zu": GCC warns it may not fit, -Werror)
    std::string free_bytes(16, '0');
    std::size_t pos = free_bytes.size();
    for (std::size_t rest = i; rest != 0 && pos != 0; rest /= 10)
      free_bytes[--pos] = static_cast<char>('0' + rest % 10);
    names.push_back(secret_0_8 + free_bytes.substr(0, 8) + secret_16_24 + free_bytes.substr(8));
  }
  return names;
}

// Every name is found at its own entry, a name not there is not, and the repeat is `repeat`.
void check_answers(const NameIndex& index, const std::vector<Entry>& entries,
                   std::optional<std::size_t> repeat) {
  CHECK(index.size() == entries.size());
  CHECK(index.first_repeat() == repeat);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry* found = index.find(entries, entries[i].name);
    REQUIRE(found != nullptr);
    // A repeated name is found at its first entry.
    CHECK(found->name == entries[i].name);
    CHECK(found <= &entries[i]);
  }
  CHECK(index.find(entries, "not/a/record") == nullptr);
  CHECK(index.find(entries, "") == nullptr);
}

}  // namespace

TEST_CASE("zip names: the table and the sorted array find every name and nothing else") {
  std::vector<std::string> names{"t/data.pkl", "t/version", "t/.data/serialization_id"};
  for (int i = 0; i < 5000; ++i)
    names.push_back("t/data/" + std::to_string(i));
  const auto entries = entries_named(names);
  const NameIndex table = NameIndex::of(entries);
  CHECK_FALSE(table.is_sorted_array());
  check_answers(table, entries, std::nullopt);
  const NameIndex sorted = NameIndex::of(entries, 0);
  CHECK(sorted.is_sorted_array());
  check_answers(sorted, entries, std::nullopt);
  CHECK(NameIndex().find(entries, "t/data.pkl") == nullptr);
  CHECK(NameIndex::of({}).find(entries, "t/data.pkl") == nullptr);
}

TEST_CASE("zip names: the first name that repeats an earlier one, in list order, is reported") {
  // "b" repeats at 3, before "a" repeats at 4 and "b" again at 5; sorted by hash, "a" might
  // come first.
  const std::vector<std::string> names{"a", "b", "c", "b", "a", "b"};
  const auto entries = entries_named(names);
  check_answers(NameIndex::of(entries), entries, 3);
  check_answers(NameIndex::of(entries, 0), entries, 3);
  // Added a few at a time, as the central directory reader adds them.
  NameIndex in_steps(entries.size());
  for (std::size_t i = 0; i <= entries.size(); i += 2)
    in_steps.add(std::span(entries).first(i));
  in_steps.finish(entries);
  check_answers(in_steps, entries, 3);
}

TEST_CASE("zip names: names crafted to collide fall back to the sorted array") {
  const auto names = colliding_names(3000);
  auto entries = entries_named(names);
  const NameIndex index = NameIndex::of(entries);
  CHECK(index.is_sorted_array());
  check_answers(index, entries, std::nullopt);
  // A repeat among them is found as the table would have found it.
  auto repeated = names;
  repeated.push_back(names[1234]);
  repeated.push_back(names[7]);
  entries = entries_named(repeated);
  const NameIndex with_repeat = NameIndex::of(entries);
  CHECK(with_repeat.is_sorted_array());
  check_answers(with_repeat, entries, 3000);
}

TEST_CASE("zip names: a copy of the index works over a copy of the entries") {
  const std::vector<std::string> names{"x/a", "x/b", "x/c"};
  std::optional<std::vector<Entry>> entries = entries_named(names);
  std::optional<NameIndex> index = NameIndex::of(*entries);
  const std::vector<Entry> entries_copy = *entries;
  const NameIndex index_copy = *index;
  entries.reset();
  index.reset();
  check_answers(index_copy, entries_copy, std::nullopt);
}

TEST_CASE("zip: of several repeated names, the one first by std::hash is named, as it was") {
  // Before NameIndex, names were sorted by std::hash, and the first repeat in that order was
  // reported; the error is still the same.
  std::vector<build::Record> records;
  for (int i = 0; i < 150; ++i)
    records.push_back({.name = "r/data/" + std::to_string(i), .data = "x"});
  // Past the first batch the reader indexes; each name repeats twice.
  const std::vector<std::string> repeated{"r/data/3", "r/data/1",   "r/data/140",
                                          "r/data/3", "r/data/140", "r/data/1"};
  for (const std::string& name : repeated)
    records.push_back({.name = name, .data = "y"});
  const auto hash_then_name = [](const std::string& a, const std::string& b) {
    const std::size_t ha = std::hash<std::string_view>{}(a);
    const std::size_t hb = std::hash<std::string_view>{}(b);
    return ha != hb ? ha < hb : a < b;
  };
  const std::string expected = *std::min_element(repeated.begin(), repeated.end(), hash_then_name);
  // Its second entry: the first of `repeated` with that name.
  const auto second =
      150 + static_cast<std::size_t>(std::find(repeated.begin(), repeated.end(), expected) -
                                     repeated.begin());
  const auto built = build::build(records);
  const auto outcome = pthload::test::parse_outcome(built.bytes);
  CHECK(outcome.code == Errc::kZipDuplicateName);
  CHECK(outcome.record == expected);
  CHECK(outcome.offset == built.records[second].central_header);
}

TEST_CASE("zip: an archive of names crafted to collide parses and finds them all") {
  const auto names = colliding_names(3000);
  std::vector<build::Record> records;
  for (const std::string& name : names)
    records.push_back({.name = name, .data = "d"});
  const auto built = build::build(records, {.alignment = 0});
  const auto archive = pthload::zip::Archive::parse(built.bytes);
  REQUIRE(archive.entries().size() == names.size());
  for (std::size_t i = 0; i < names.size(); i += 97)
    CHECK(archive.find(names[i]) == &archive.entries()[i]);
  records.push_back({.name = names[42], .data = "e"});
  const auto repeated = build::build(records, {.alignment = 0});
  const auto outcome = pthload::test::parse_outcome(repeated.bytes);
  CHECK(outcome.code == Errc::kZipDuplicateName);
  CHECK(outcome.record == names[42]);
}
