// The end of central directory record and the zip64 end record and locator: one corruption per
// case.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/bytes.hpp"
#include "support/zip_builder.hpp"
#include "zip/zip_test_support.hpp"

using pthload::Errc;
using pthload::test::bytes_of;
using pthload::test::parse_outcome;
namespace build = pthload::test::zip_build;
namespace ef = build::end_field;
namespace zf = build::zip64_end_field;
namespace lf = build::locator_field;

namespace {
const std::vector<build::Record> kRecords = {
    {.name = "a/data.pkl", .data = "\x80\x02K\x01."},
    {.name = "a/data/0", .data = std::string(16, '\x7f')},
};
build::Built classic() {
  return build::build(kRecords, {.zip64_end = false});
}
build::Built zip64() {
  return build::build(kRecords);
}
build::Built saturated() {
  return build::build(kRecords, {.saturate_end_record = true});
}
}  // namespace

TEST_SUITE_BEGIN("eocd");

TEST_CASE("zip: files that are not archives are named so") {
  for (const std::string& text :
       std::vector<std::string>{"", "PK", "hello world, not a zip file at all",
                                std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8"
                                            "\x50\x19\x2e",
                                            15)}) {
    const auto bytes = bytes_of(text);
    const auto result = parse_outcome(bytes);
    CHECK(result.code == Errc::kZipNotAnArchive);
  }
}

TEST_CASE("zip: an archive cut before its end record has no end record") {
  auto bytes = zip64().bytes;
  bytes.erase(bytes.end() - 22, bytes.end());
  CHECK(parse_outcome(bytes).code == Errc::kZipEndRecordNotFound);
}

TEST_CASE("zip: an end record whose comment runs past the end of file is truncated") {
  auto built = classic();
  build::poke_le16(built.bytes, built.end_record + ef::kCommentLength, 1);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipEndRecordTruncated);
  CHECK(result.offset == built.end_record);
}

TEST_CASE("zip: like miniz, the end record signature nearest the end wins, even in a comment") {
  // torch's reader takes the last signature with room for a record after it and ignores the
  // comment length; so does pthload, then refuses the comment that runs past the end of file.
  const std::string comment = std::string("PK\x05\x06") + std::string(16, 'A') + "AA tail";
  const auto built = build::build(kRecords, {.comment = comment});
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipEndRecordTruncated);
  CHECK(result.offset == built.end_record + 22);
}

TEST_CASE("zip: a signature too close to the end of file for a record is skipped") {
  const std::string comment = std::string("tail PK\x05\x06") + std::string(17, 'A');
  const auto built = build::build(kRecords, {.comment = comment});
  const auto archive = pthload::zip::Archive::parse(built.bytes);
  CHECK(archive.entries().size() == 2);
  CHECK(archive.comment() == comment);
}

TEST_CASE("zip: a comment ending in a complete end record is read as that record, like miniz") {
  // Both readings end exactly at EOF; miniz (torch) and Python take the one nearest the end, so
  // pthload must too, or it would show a different archive than torch does.
  std::string fake_end(22, '\0');
  fake_end.replace(0, 4, "PK\x05\x06");
  const auto built = build::build(kRecords, {.comment = fake_end});
  const auto archive = pthload::zip::Archive::parse(built.bytes);
  CHECK(archive.entries().empty());
  CHECK(archive.end_of_central_directory_offset() == built.bytes.size() - 22);
}

TEST_CASE("zip: bytes after the end record are tolerated") {
  auto bytes = zip64().bytes;
  for (char c : std::string("trailing junk"))
    bytes.push_back(static_cast<std::byte>(c));
  CHECK(parse_outcome(bytes).code == Errc::kOk);
}

TEST_CASE("zip: an end record beyond the comment bound is not found") {
  auto bytes = zip64().bytes;
  bytes.resize(bytes.size() + 70'000, std::byte{0});
  CHECK(parse_outcome(bytes).code == Errc::kZipEndRecordNotFound);
}

TEST_CASE("zip: multi-disk archives are refused as unsupported") {
  for (const auto field : {ef::kDisk, ef::kCentralDirectoryDisk}) {
    auto built = classic();
    build::poke_le16(built.bytes, built.end_record + field, 1);
    const auto result = parse_outcome(built.bytes);
    CHECK(result.code == Errc::kZipMultiDiskUnsupported);
    CHECK(result.unsupported);
  }
}

TEST_CASE("zip: entries on this disk must equal the total on a single disk") {
  auto built = classic();
  build::poke_le16(built.bytes, built.end_record + ef::kEntriesOnDisk, 1);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipEntryCountMismatch);
}

TEST_CASE("zip: an entry count the central directory does not hold is a mismatch") {
  for (const std::uint64_t count : {1u, 3u, 0u}) {
    auto built = classic();
    build::poke_le16(built.bytes, built.end_record + ef::kEntriesOnDisk, count);
    build::poke_le16(built.bytes, built.end_record + ef::kEntries, count);
    CHECK(parse_outcome(built.bytes).code == Errc::kZipEntryCountMismatch);
  }
}

TEST_CASE("zip: a huge entry count is refused before anything is reserved") {
  auto built = saturated();
  build::poke_le64(built.bytes, built.zip64_end_record + zf::kEntriesOnDisk, 1'000'000);
  build::poke_le64(built.bytes, built.zip64_end_record + zf::kEntries, 1'000'000);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipEntryCountMismatch);
  CHECK(result.offset == built.zip64_end_record);
}

TEST_CASE("zip: more entries than Limits::max_zip_entries are refused") {
  const auto built = classic();
  CHECK(parse_outcome(built.bytes, {.max_zip_entries = 1}).code == Errc::kZipLimitExceeded);
  CHECK(parse_outcome(built.bytes, {.max_zip_entries = 2}).code == Errc::kOk);
}

TEST_CASE("zip: a central directory past the end of file is out of bounds") {
  auto built = classic();
  build::poke_le32(built.bytes, built.end_record + ef::kCentralDirectoryOffset, 0xFFFF'FFF0);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipCentralDirectoryOutOfBounds);
  CHECK(result.offset == built.end_record);
}

TEST_CASE("zip: a central directory running into the end record is out of bounds") {
  auto built = classic();
  const auto size = build::peek(built.bytes, built.end_record + ef::kCentralDirectorySize, 4);
  build::poke_le32(built.bytes, built.end_record + ef::kCentralDirectorySize, size + 1);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipCentralDirectoryOutOfBounds);
}

TEST_CASE("zip: a central directory offset off by one finds no central header") {
  auto built = classic();
  build::poke_le32(built.bytes, built.end_record + ef::kCentralDirectoryOffset,
                   built.central_directory - 1);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipCentralDirectoryEntryInvalid);
}

TEST_SUITE_END();
TEST_SUITE_BEGIN("zip64");

TEST_CASE("zip: saturated end record fields take the zip64 end record's values") {
  const auto built = saturated();
  const auto archive = pthload::zip::Archive::parse(built.bytes);
  CHECK(archive.is_zip64());
  CHECK(archive.entries().size() == 2);
  CHECK(archive.central_directory_offset() == built.central_directory);
}

TEST_CASE("zip: an end record disagreeing with the zip64 end record is refused") {
  for (const auto field : {ef::kEntries, ef::kCentralDirectorySize, ef::kCentralDirectoryOffset}) {
    auto built = zip64();
    const unsigned width = field == ef::kEntries ? 2 : 4;
    build::poke(built.bytes, built.end_record + field, width,
                build::peek(built.bytes, built.end_record + field, width) + 1);
    CHECK(parse_outcome(built.bytes).code == Errc::kZip64EndRecordInvalid);
  }
}

TEST_CASE("zip: a zip64 locator on another disk is refused as multi-disk") {
  auto built = zip64();
  build::poke_le32(built.bytes, built.zip64_locator + lf::kDisk, 1);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipMultiDiskUnsupported);
  built = zip64();
  build::poke_le32(built.bytes, built.zip64_locator + lf::kDisks, 2);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipMultiDiskUnsupported);
}

TEST_CASE("zip: a zip64 locator with a disk count of 0 is tolerated") {
  auto built = zip64();
  build::poke_le32(built.bytes, built.zip64_locator + lf::kDisks, 0);
  CHECK(parse_outcome(built.bytes).code == Errc::kOk);
}

TEST_CASE("zip: a zip64 locator pointing at or past itself is invalid") {
  for (const std::uint64_t target : {0xFFFF'FFFF'FFFF'FFFFull, 0ull + 1}) {
    auto built = zip64();
    const auto value = target == 1 ? built.zip64_locator - 55 : target;
    build::poke_le64(built.bytes, built.zip64_locator + lf::kZip64EndRecordOffset, value);
    const auto result = parse_outcome(built.bytes);
    CHECK(result.code == Errc::kZip64LocatorInvalid);
    CHECK(result.offset == built.zip64_locator + lf::kZip64EndRecordOffset);
  }
}

TEST_CASE("zip: a zip64 locator pointing at something else finds no zip64 end record") {
  auto built = zip64();
  build::poke_le64(built.bytes, built.zip64_locator + lf::kZip64EndRecordOffset,
                   built.zip64_end_record - 1);
  CHECK(parse_outcome(built.bytes).code == Errc::kZip64EndRecordInvalid);
  built = zip64();
  build::poke_le32(built.bytes, built.zip64_end_record + zf::kSignature, 0x06064b51);
  CHECK(parse_outcome(built.bytes).code == Errc::kZip64EndRecordInvalid);
}

TEST_CASE("zip: a zip64 end record size that does not fit is invalid") {
  for (const std::uint64_t size : {0ull, 43ull, 45ull, 0xFFFF'FFFF'FFFF'FFFFull}) {
    auto built = zip64();
    build::poke_le64(built.bytes, built.zip64_end_record + zf::kRecordSize, size);
    CHECK(parse_outcome(built.bytes).code == Errc::kZip64EndRecordInvalid);
  }
}

TEST_CASE("zip: a zip64 end record on another disk is refused as multi-disk") {
  for (const auto field : {zf::kDisk, zf::kCentralDirectoryDisk}) {
    auto built = saturated();
    build::poke_le32(built.bytes, built.zip64_end_record + field, 1);
    CHECK(parse_outcome(built.bytes).code == Errc::kZipMultiDiskUnsupported);
  }
}

TEST_CASE("zip: zip64 entries on this disk must equal its total") {
  auto built = saturated();
  build::poke_le64(built.bytes, built.zip64_end_record + zf::kEntriesOnDisk, 1);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipEntryCountMismatch);
}

TEST_CASE("zip: zip64 central directory bounds are checked like classic ones") {
  auto built = saturated();
  build::poke_le64(built.bytes, built.zip64_end_record + zf::kCentralDirectoryOffset,
                   0xFFFF'FFFF'FFFF'FF00ull);
  auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipCentralDirectoryOutOfBounds);
  CHECK(result.offset == built.zip64_end_record);
  built = saturated();
  build::poke_le64(built.bytes, built.zip64_end_record + zf::kCentralDirectorySize,
                   0xFFFF'FFFF'FFFF'FFFFull);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipCentralDirectoryOutOfBounds);
}

TEST_CASE("zip: without a locator, saturated end record fields are taken literally") {
  auto built = saturated();
  build::poke_le32(built.bytes, built.zip64_locator + lf::kSignature, 0);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipCentralDirectoryOutOfBounds);
}

TEST_SUITE_END();
