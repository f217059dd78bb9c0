// The io=map image of an archive (fill_archive_image with LocalHeaders::kResolved): local headers
// checked where they are read, kept out of the image, and every failure reported as parsing the
// whole file reports it.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/file_reader.hpp"
#include "common/mapped_file.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/zip_builder.hpp"
#include "zip/archive.hpp"
#include "zip/image.hpp"
#include "zip/zip_test_support.hpp"

using pthload::Errc;
using pthload::common::FileReader;
using pthload::common::MappedFile;
using pthload::zip::Archive;
using pthload::zip::Entry;
using pthload::zip::LocalHeaders;
namespace build = pthload::test::zip_build;
namespace lf = build::local_field;

namespace {

bool is_storage(const Entry& entry) {
  return entry.name.starts_with("t/data/");
}

// 300 small storages between their headers, as an optimizer state has them; a large one, whose
// header lies far from the next (a run of its own); the pickle first, the version last.
std::vector<build::Record> records() {
  std::vector<build::Record> result{{.name = "t/data.pkl", .data = "\x80\x02K\x01."}};
  for (int i = 0; i < 300; ++i) {
    result.push_back({.name = "t/data/" + std::to_string(i), .data = std::string(16, 'a')});
  }
  result.push_back({.name = "t/data/big", .data = std::string(200'000, 'b')});
  result.push_back({.name = "t/data/300", .data = std::string(16, 'c')});
  result.push_back({.name = "t/version", .data = "3\n"});
  return result;
}

// What parsing gave: the error (zip_test_support's Outcome), and each record's data offset.
struct Parsed {
  pthload::test::Outcome outcome;
  std::vector<std::uint64_t> data_offsets;
};

template <typename Parse>
Parsed parsed_by(Parse&& parse) {
  Parsed parsed;
  try {
    const Archive archive = parse();
    for (const Entry& entry : archive.entries())
      parsed.data_offsets.push_back(entry.data_offset);
  } catch (const pthload::Error& error) {
    parsed.outcome = pthload::test::outcome_of_error(error);
  }
  return parsed;
}

// What Archive::parse says of the whole file, and of the io=map image: must be the same.
// Returns the first.
Parsed check_same_outcome(const std::vector<std::byte>& bytes, bool expect_resolved) {
  const pthload::test::TempPath file(bytes);
  const MappedFile image = MappedFile::image_with_views(FileReader::open(file.path()));
  auto directory = pthload::zip::fill_archive_image(image, {}, is_storage, LocalHeaders::kResolved);
  REQUIRE(directory.has_value());
  CHECK(directory->local_headers_resolved == expect_resolved);
  const Parsed from_image = parsed_by([&] { return Archive::parse(image, {}, *directory); });
  const Parsed from_file = parsed_by([&] { return Archive::parse(bytes); });
  CHECK(from_image.outcome.code == from_file.outcome.code);
  CHECK(from_image.outcome.unsupported == from_file.outcome.unsupported);
  CHECK(from_image.outcome.offset == from_file.outcome.offset);
  CHECK(from_image.outcome.record == from_file.outcome.record);
  CHECK(from_image.outcome.message == from_file.outcome.message);
  CHECK(from_image.data_offsets == from_file.data_offsets);
  return from_file;
}

}  // namespace

TEST_CASE("zip image: local headers are resolved where they are read and kept out of the image") {
  const build::Built built = build::build(records());
  const pthload::test::TempPath file(built.bytes);
  const MappedFile image = MappedFile::image_with_views(FileReader::open(file.path()));
  auto directory = pthload::zip::fill_archive_image(image, {}, is_storage, LocalHeaders::kResolved);
  REQUIRE(directory.has_value());
  CHECK(directory->local_headers_resolved);
  const Archive archive = Archive::parse(image, {}, std::move(*directory));
  const Archive whole = Archive::parse(built.bytes);
  REQUIRE(archive.entries().size() == whole.entries().size());
  for (std::size_t i = 0; i < whole.entries().size(); ++i) {
    CHECK(archive.entries()[i].data_offset == whole.entries()[i].data_offset);
    CHECK(archive.entries()[i].data_offset == built.records[i].data);
  }
  const auto bytes = image.bytes();
  // A storage's header and payload are holes of the image (zeros): views go to the mapping.
  for (const std::size_t i : {std::size_t{1}, std::size_t{150}, std::size_t{301}}) {
    CHECK(bytes[built.records[i].local_header] == std::byte{0});
    CHECK(bytes[built.records[i].data] == std::byte{0});
    const auto view = image.view_of(archive.read(archive.entries()[i]).bytes());
    REQUIRE(view.has_value());
    CHECK(static_cast<char>(view->front()) == (i == 301 ? 'b' : 'a'));
  }
  // The pickle and the version are read into it.
  const std::vector<std::string> expected{"\x80\x02K\x01.", "3\n"};
  for (const std::size_t i : {std::size_t{0}, archive.entries().size() - 1}) {
    const auto contents = archive.read(archive.entries()[i]).bytes();
    CHECK(std::string(reinterpret_cast<const char*>(contents.data()), contents.size()) ==
          (i == 0 ? expected[0] : expected[1]));
  }
}

TEST_CASE(
    "zip image: a local header that fails its checks is reported as parsing the file reports it") {
  const build::Built built = build::build(records());
  const std::uint64_t header = built.records[120].local_header;
  struct Corruption {
    const char* name;
    std::uint64_t offset;
    std::byte value;
    bool header_fails;  // else the header reads, and the layout check finds the overlap
  };
  const Corruption corruptions[] = {
      {"signature", header + lf::kSignature, std::byte{'X'}, true},
      {"method", header + lf::kMethod, std::byte{8}, true},
      {"flags: encrypted", header + lf::kFlags, std::byte{1}, true},
      {"name", header + lf::kName + 2, std::byte{'!'}, true},
      {"name length", header + lf::kNameLength, std::byte{0xFF}, true},
      {"extra length over the next records", header + lf::kExtraLength + 1, std::byte{0xFF}, false},
  };
  for (const Corruption& corruption : corruptions) {
    const std::string name = corruption.name;
    CAPTURE(name);
    auto bytes = built.bytes;
    bytes[corruption.offset] = corruption.value;
    CHECK(check_same_outcome(bytes, !corruption.header_fails).outcome.code != Errc::kOk);
  }
  // The last record's header cut short by the end of the file: not a header the window reads.
  auto cut = built.bytes;
  cut.resize(built.records.back().local_header + 10);
  CAPTURE("truncated");
  const pthload::test::TempPath file(cut);
  const MappedFile image = MappedFile::image_with_views(FileReader::open(file.path()));
  CHECK_FALSE(
      pthload::zip::fill_archive_image(image, {}, is_storage, LocalHeaders::kResolved).has_value());
}

TEST_CASE("zip image: central headers out of file order resolve the same") {
  // Two central headers swapped: the second record's local header now comes first.
  build::Built built = build::build(records());
  const Archive whole = Archive::parse(built.bytes);
  const auto first = built.records[1].central_header;
  const auto second = built.records[2].central_header;
  const auto third = built.records[3].central_header;
  std::vector<std::byte> swapped(built.bytes.begin(), built.bytes.begin() + first);
  swapped.insert(swapped.end(), built.bytes.begin() + second, built.bytes.begin() + third);
  swapped.insert(swapped.end(), built.bytes.begin() + first, built.bytes.begin() + second);
  swapped.insert(swapped.end(), built.bytes.begin() + third, built.bytes.end());
  REQUIRE(swapped.size() == built.bytes.size());
  const Parsed parsed = check_same_outcome(swapped, true);
  CHECK(parsed.outcome.code == Errc::kOk);
  CHECK(parsed.data_offsets.size() == whole.entries().size());
}

TEST_CASE("zip image: the header window grows when a later run of headers needs more") {
  // The first run (the pickle's header and the large record's) needs a few KiB, the second (300
  // small storages after the large payload) more: the window's buffer must grow, not overflow.
  std::vector<build::Record> grown{{.name = "t/data.pkl", .data = "\x80\x02K\x01."},
                                   {.name = "t/data/big", .data = std::string(200'000, 'b')}};
  for (int i = 0; i < 300; ++i) {
    grown.push_back({.name = "t/data/" + std::to_string(i), .data = std::string(16, 'a')});
  }
  const build::Built built = build::build(grown);
  const Parsed parsed = check_same_outcome(built.bytes, true);
  CHECK(parsed.outcome.code == Errc::kOk);
  REQUIRE(parsed.data_offsets.size() == built.records.size());
  for (std::size_t i = 0; i < built.records.size(); ++i)
    CHECK(parsed.data_offsets[i] == built.records[i].data);
}

TEST_CASE("zip image: a zip64 end record far before the tail (extensible data) is read too") {
  // The locator says where the record starts; 100 KB of extensible data put it before the tail
  // the image reads first. Past 16 MiB, a tail that makes no sense is not answered by reading
  // the whole file, so the record must be read where the locator says.
  auto with_large_payload = records();
  with_large_payload.insert(with_large_payload.end() - 1,
                            {.name = "t/data/large", .data = std::string(17 << 20, 'l')});
  const build::Built built =
      build::build(with_large_payload, {.zip64_extensible_data = std::string(100'000, 'x')});
  REQUIRE(built.bytes.size() > std::size_t{17} << 20);
  const Parsed parsed = check_same_outcome(built.bytes, true);
  CHECK(parsed.outcome.code == Errc::kOk);
  const pthload::test::TempPath file(built.bytes);
  const MappedFile image = MappedFile::image(FileReader::open(file.path()));
  const auto directory = pthload::zip::fill_archive_image(image, {}, is_storage);
  REQUIRE(directory.has_value());
  CHECK(Archive::parse(image, {}, *directory).entries().size() == with_large_payload.size());
}
