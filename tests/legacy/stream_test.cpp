// lib/legacy over built streams: the stacked pickles, the storage table, and each error.
#include "legacy/stream.hpp"

#include <doctest/doctest.h>

#include <string>

#include "pthload/error.hpp"
#include "support/bytes.hpp"
#include "support/error_code.hpp"
#include "support/legacy_builder.hpp"

using pthload::Errc;
using pthload::legacy::Stream;
using pthload::test::bytes_of;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::PickleWriter;
namespace lb = pthload::test::legacy_build;

namespace {

std::string main_pickle() {
  PickleWriter p;
  p.empty_dict().mark().str("a");
  lb::tensor(p, "FloatStorage", "100", 6, 0, {2, 3}, {3, 1});
  return p.setitems().stop().bytes();
}

std::string header() {
  return lb::magic() + lb::protocol() + lb::sys_info();
}

std::string good_stream() {
  return header() + main_pickle() + lb::key_list({"100"}) + lb::count(6) + lb::floats(6);
}

Errc parse_code(const std::string& text) {
  const auto bytes = bytes_of(text);
  return error_code_of([&] { (void)Stream::parse(bytes); });
}

Errc data_code(const std::string& text, std::vector<std::size_t> sizes) {
  const auto bytes = bytes_of(text);
  return error_code_of([&] { (void)Stream::parse(bytes).storage_data(sizes); });
}

}  // namespace

TEST_CASE("legacy: a stream gives its main pickle, keys and storage ranges") {
  const auto text = good_stream();
  const auto bytes = bytes_of(text);
  auto stream = Stream::parse(bytes);
  CHECK(stream.main().root->is(pthload::pickle::Kind::kDict));
  CHECK(stream.main_range().offset == header().size());
  CHECK(stream.main_range().size == main_pickle().size());
  CHECK(stream.keys() == std::vector<std::string>{"100"});
  CHECK(stream.little_endian() == true);
  CHECK(stream.data_offset() == text.size() - 8 - 24);
  const std::size_t sizes[] = {4};
  const auto data = stream.storage_data(sizes);
  REQUIRE(data.size() == 1);
  CHECK(data[0].count == 6);
  CHECK(data[0].count_offset == stream.data_offset());
  CHECK(data[0].bytes.offset == stream.data_offset() + 8);
  CHECK(data[0].bytes.size == 24);
}

TEST_CASE("legacy: persistent ids reach the callback in file order") {
  const auto bytes = bytes_of(good_stream());
  int calls = 0;
  (void)Stream::parse(bytes, {}, [&](const pthload::pickle::Value&, pthload::pickle::ValueArena&) {
    ++calls;
    return nullptr;
  });
  CHECK(calls == 1);
}

TEST_CASE("legacy: header pickles") {
  CHECK(parse_code(lb::magic(false) + lb::protocol() + lb::sys_info() + main_pickle() +
                   lb::key_list({"100"})) == Errc::kLegacyBadMagic);
  CHECK(parse_code(PickleWriter().integer(7).stop().bytes()) == Errc::kLegacyBadMagic);
  CHECK(parse_code(lb::magic() + lb::protocol(1000) + lb::sys_info() + main_pickle() +
                   lb::key_list({"100"})) == Errc::kLegacyBadProtocol);
  CHECK(parse_code(lb::magic() + PickleWriter().str("1001").stop().bytes()) ==
        Errc::kLegacyBadProtocol);
  CHECK(parse_code(lb::magic() + lb::protocol() + PickleWriter().empty_list().stop().bytes() +
                   main_pickle() + lb::key_list({"100"})) == Errc::kLegacyBadSysInfo);
}

TEST_CASE("legacy: truncated streams") {
  CHECK(parse_code(lb::magic()) == Errc::kLegacyTruncated);
  CHECK(parse_code(header()) == Errc::kLegacyTruncated);
  CHECK(parse_code(header() + main_pickle()) == Errc::kLegacyTruncated);
  // Cut inside the main pickle: the pickle machine reports it.
  const auto cut = header() + main_pickle().substr(0, 20);
  CHECK_THROWS_AS((void)Stream::parse(bytes_of(cut)), pthload::FormatError);
  // Cut inside an element count.
  const auto text = header() + main_pickle() + lb::key_list({"100"}) + lb::count(6).substr(0, 5);
  CHECK(data_code(text, {4}) == Errc::kLegacyTruncated);
}

TEST_CASE("legacy: counts past the end of the file and huge counts") {
  const auto start = header() + main_pickle() + lb::key_list({"100"});
  CHECK(data_code(start + lb::count(7) + lb::floats(6), {4}) == Errc::kLegacyStorageOutOfBounds);
  CHECK(data_code(start + lb::count(std::uint64_t{1} << 62) + lb::floats(6), {4}) ==
        Errc::kLegacyStorageOutOfBounds);
  CHECK(data_code(start + lb::count(~std::uint64_t{0}) + lb::floats(6), {4}) ==
        Errc::kLegacyStorageOutOfBounds);
  CHECK(data_code(start + lb::count(~std::uint64_t{0} / 4 + 1) + lb::floats(6), {4}) ==
        Errc::kLegacyStorageOutOfBounds);
  // The error carries the count's file offset.
  const auto bytes = bytes_of(start + lb::count(7) + lb::floats(6));
  const auto e = error_thrown<pthload::FormatError>([&] {
    const std::size_t sizes[] = {4};
    (void)Stream::parse(bytes).storage_data(sizes);
  });
  CHECK(e.context().offset == start.size());
}

TEST_CASE("legacy: the key list") {
  const auto base = header() + main_pickle();
  CHECK(parse_code(base + PickleWriter().empty_dict().stop().bytes()) == Errc::kLegacyBadKeyList);
  CHECK(parse_code(base + lb::key_list({"100", "100"})) == Errc::kLegacyBadKeyList);
  PickleWriter float_key;
  float_key.empty_list().mark().raw(std::string_view("G\x3f\xf0\0\0\0\0\0\0", 9)).appends().stop();
  CHECK(parse_code(base + float_key.bytes()) == Errc::kLegacyBadKeyList);
  // One element size per key.
  CHECK(data_code(good_stream(), {4, 4}) == Errc::kLegacyKeyMismatch);
  CHECK(data_code(good_stream(), {}) == Errc::kLegacyKeyMismatch);
}
