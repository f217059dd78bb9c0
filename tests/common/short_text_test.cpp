// ShortText: a storage's key and location in 16 bytes, inline up to 15.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

#include "common/short_text.hpp"

using pthload::common::ShortText;

TEST_CASE("ShortText: keeps text of any size, in 16 bytes") {
  static_assert(sizeof(ShortText) == 16);
  for (const std::size_t size : {0, 1, 3, 14, 15, 16, 17, 100, 70000}) {
    CAPTURE(size);
    std::string text(size, 'k');
    for (std::size_t i = 0; i < size; ++i)
      text[i] = static_cast<char>('a' + i % 26);
    const ShortText kept(text);
    CHECK(kept.view() == text);
    CHECK(kept.size() == size);
    CHECK(kept.empty() == (size == 0));
    CHECK(kept == std::string_view(text));
    CHECK(fmt::format("<{}>", kept) == "<" + text + ">");
    ShortText copy(kept);
    CHECK(copy == kept);
    ShortText moved(std::move(copy));
    CHECK(moved.view() == text);
    CHECK(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from ShortText is empty
    ShortText assigned("cpu");
    assigned = kept;
    CHECK(assigned.view() == text);
    assigned = std::move(moved);
    CHECK(assigned.view() == text);
    assigned = std::string_view("cuda:1");
    CHECK(assigned.view() == "cuda:1");
    assigned = std::string_view(text);
    CHECK(assigned.view() == text);
    // Assigned its own text, whole.
    assigned = assigned.view();
    CHECK(assigned.view() == text);
  }
}

TEST_CASE("ShortText: a default one is empty, and copies own their text") {
  const ShortText empty;
  CHECK(empty.view().empty());
  std::string source(40, 'x');
  ShortText long_text(source);
  source.assign(40, 'y');
  CHECK(long_text.view() == std::string(40, 'x'));
  ShortText other(long_text);
  long_text = std::string_view("12345");
  CHECK(other.view() == std::string(40, 'x'));
  CHECK(long_text.view() == "12345");
}
