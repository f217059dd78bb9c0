// Central directory headers and their zip64 extra fields: one corruption per case.
#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "support/bytes.hpp"
#include "support/error_code.hpp"
#include "support/zip_builder.hpp"
#include "zip/central_directory.hpp"
#include "zip/zip_test_support.hpp"

using pthload::Errc;
using pthload::test::error_thrown;
using pthload::test::parse_outcome;
using pthload::test::text_of;
using pthload::zip::Archive;
namespace build = pthload::test::zip_build;
namespace cf = build::central_field;

namespace {
const std::vector<build::Record> kRecords = {
    {.name = "c/data.pkl", .data = "\x80\x02K\x01."},
    {.name = "c/data/0", .data = std::string(100, 'w'), .deflate = true},
    {.name = "c/version", .data = "3\n"},
};
build::Built torch_like() {
  return build::build(kRecords);
}
build::Built with_zip64_extra() {
  return build::build(kRecords, {.zip64_extra = true});
}
}  // namespace

TEST_SUITE_BEGIN("central directory");

TEST_CASE("zip: a central header without its signature is invalid") {
  auto built = torch_like();
  const auto header = built.records[1].central_header;
  build::poke_le32(built.bytes, header + cf::kSignature, 0x02014b51);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipCentralDirectoryEntryInvalid);
  CHECK(result.offset == header);
}

TEST_CASE("zip: a central header whose name runs past the directory is invalid") {
  auto built = torch_like();
  build::poke_le16(built.bytes, built.records[2].central_header + cf::kNameLength, 0xFFFF);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipCentralDirectoryEntryInvalid);
}

TEST_CASE("zip: a central header cut short by the directory's end is truncated, not read past") {
  // The directory ends 20 bytes into the second header, and the bytes given end with it (an
  // exactly-sized copy: AddressSanitizer reports a read past it).
  const auto built = build::build({{.name = "c/" + std::string(30, 'a'), .data = "1"},
                                   {.name = "c/" + std::string(30, 'b'), .data = "2"}});
  const auto second = built.records[1].central_header;
  const std::vector<std::byte> file(built.bytes.begin(),
                                    built.bytes.begin() + static_cast<std::ptrdiff_t>(second + 20));
  pthload::zip::EndRecords end;
  end.entry_count = 2;
  end.central_directory_offset = built.central_directory;
  end.central_directory_size = second + 20 - built.central_directory;
  const auto error = error_thrown<pthload::FormatError>(
      [&] { (void)pthload::zip::read_central_directory(file, end, {}); });
  CHECK(error.code() == Errc::kZipCentralDirectoryEntryInvalid);
  // The compressed size (at 20) is the first field that does not fit.
  CHECK(error.context().offset == second + 20);
}

TEST_CASE("zip: a central header whose comment runs past the directory is invalid") {
  auto built = torch_like();
  build::poke_le16(built.bytes, built.records[2].central_header + cf::kCommentLength, 1);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipCentralDirectoryEntryInvalid);
  CHECK(result.record == "c/version");
}

TEST_CASE("zip: a name with a NUL byte is refused") {
  auto built = build::build({{.name = std::string("c/a\0b", 5), .data = "x"}});
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipCentralDirectoryEntryInvalid);
  CHECK(result.offset == built.records[0].central_header + cf::kName);
}

TEST_CASE("zip: a name that appears twice is refused") {
  const auto built = build::build({{.name = "c/data/0", .data = "a"},
                                   {.name = "c/x", .data = "b"},
                                   {.name = "c/data/0", .data = "c"}});
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipDuplicateName);
  CHECK(result.record == "c/data/0");
  CHECK(result.offset == built.records[2].central_header);
}

TEST_CASE("zip: names are compared as raw bytes") {
  const auto built = build::build({{.name = "c/\xc3\xa9", .data = "a"},
                                   {.name = "c/e\xcc\x81", .data = "b"},
                                   {.name = "c/\xff", .data = "c"}});
  const auto archive = Archive::parse(built.bytes);
  CHECK(archive.find("c/\xc3\xa9") != nullptr);
  CHECK(archive.find("c/e\xcc\x81") != nullptr);
  CHECK(archive.find("c/\xff") != nullptr);
}

TEST_CASE("zip: a record starting on another disk is refused as multi-disk") {
  auto built = torch_like();
  build::poke_le16(built.bytes, built.records[1].central_header + cf::kDisk, 1);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipMultiDiskUnsupported);
  CHECK(result.record == "c/data/0");
}

TEST_CASE("zip: more central headers than the end record declares is a mismatch") {
  auto built = torch_like();
  // Shrinking the directory to two headers leaves the third as bytes the count does not cover.
  auto archive = Archive::parse(built.bytes);
  (void)archive;
  build::poke_le16(built.bytes, built.end_record + build::end_field::kEntries, 2);
  build::poke_le16(built.bytes, built.end_record + build::end_field::kEntriesOnDisk, 2);
  build::poke_le64(built.bytes, built.zip64_end_record + build::zip64_end_field::kEntries, 2);
  build::poke_le64(built.bytes, built.zip64_end_record + build::zip64_end_field::kEntriesOnDisk, 2);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipEntryCountMismatch);
  CHECK(result.offset == built.records[2].central_header);
}

TEST_SUITE_END();
TEST_SUITE_BEGIN("zip64 extra");

TEST_CASE("zip: zip64 extra fields supply saturated sizes and offsets") {
  const auto built = with_zip64_extra();
  const auto archive = Archive::parse(built.bytes);
  REQUIRE(archive.entries().size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& entry = archive.entries()[i];
    CHECK(entry.uncompressed_size == kRecords[i].data.size());
    CHECK(entry.local_header_offset == built.records[i].local_header);
    CHECK(entry.data_offset == built.records[i].data);
    CHECK(text_of(archive.read(entry, true).bytes()) == kRecords[i].data);
  }
}

TEST_CASE("zip: a saturated size without a zip64 extra field is invalid") {
  auto built = build::build(kRecords, {.zip64_end = false});
  const auto header = built.records[0].central_header;
  build::poke_le32(built.bytes, header + cf::kCompressedSize, 0xFFFF'FFFF);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZip64ExtraFieldInvalid);
  CHECK(result.record == "c/data.pkl");
}

TEST_CASE("zip: a zip64 extra field too short for the saturated fields is invalid") {
  auto built = with_zip64_extra();
  // 16 bytes hold the two sizes but not the saturated local header offset.
  build::poke_le16(built.bytes, built.records[1].central_extra + 2, 16);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZip64ExtraFieldInvalid);
  CHECK(result.record == "c/data/0");
  CHECK(result.offset == built.records[1].central_extra + 4 + 16);
}

TEST_CASE("zip: a zip64 extra field that runs past the extra data is not used") {
  auto built = with_zip64_extra();
  build::poke_le16(built.bytes, built.records[1].central_extra + 2, 25);
  CHECK(parse_outcome(built.bytes).code == Errc::kZip64ExtraFieldInvalid);
}

TEST_CASE("zip: zip64 values are read in the order APPNOTE gives") {
  auto built = with_zip64_extra();
  const auto header = built.records[1].central_header;
  // With only the offset saturated, the field's first value is the offset.
  const auto extra = built.records[1].central_extra;
  const auto offset = build::peek(built.bytes, extra + 4 + 16, 8);
  build::poke_le32(built.bytes, header + cf::kSize, 100);
  build::poke_le32(built.bytes, header + cf::kCompressedSize,
                   build::peek(built.bytes, extra + 4 + 8, 8));
  build::poke_le64(built.bytes, extra + 4, offset);
  const auto archive = Archive::parse(built.bytes);
  CHECK(archive.entries()[1].local_header_offset == built.records[1].local_header);
  CHECK(text_of(archive.read(archive.entries()[1], true).bytes()) == kRecords[1].data);
}

TEST_CASE("zip: a 64-bit local header offset past the end is out of bounds") {
  auto built = with_zip64_extra();
  build::poke_le64(built.bytes, built.records[2].central_extra + 4 + 16, 1ull << 40);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipRecordOutOfBounds);
  CHECK(result.record == "c/version");
  CHECK(result.offset == 1ull << 40);
}

TEST_CASE("zip: a 64-bit size past the end is out of bounds") {
  auto built = with_zip64_extra();
  build::poke_le64(built.bytes, built.records[2].central_extra + 4 + 8, 0xFFFF'FFFF'FFFF'FFF0ull);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipRecordOutOfBounds);
  CHECK(result.offset == built.records[2].data);
}

TEST_SUITE_END();
