// Local headers against the central directory, and where records lie: one corruption per case.
#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "support/bytes.hpp"
#include "support/error_code.hpp"
#include "support/zip_builder.hpp"
#include "zip/local_header.hpp"
#include "zip/zip_test_support.hpp"

using pthload::Errc;
using pthload::test::error_thrown;
using pthload::test::parse_outcome;
using pthload::test::text_of;
using pthload::zip::Archive;
namespace build = pthload::test::zip_build;
namespace lf = build::local_field;
namespace cf = build::central_field;

namespace {
const std::vector<build::Record> kRecords = {
    {.name = "l/data.pkl", .data = "\x80\x02K\x01."},
    {.name = "l/data/0", .data = std::string(100, 'w')},
    {.name = "l/version", .data = "3\n"},
};
build::Built torch_like() {
  return build::build(kRecords);
}
build::Built plain() {
  return build::build(kRecords, {.zip64_end = false, .data_descriptor = false, .alignment = 0});
}
}  // namespace

TEST_SUITE_BEGIN("local");

TEST_CASE("zip: a local header offset past the end of file is out of bounds") {
  auto built = torch_like();
  build::poke_le32(built.bytes, built.records[1].central_header + cf::kLocalHeaderOffset,
                   built.bytes.size() - 10);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipRecordOutOfBounds);
  CHECK(result.record == "l/data/0");
  CHECK(result.offset == built.bytes.size() - 10);
}

TEST_CASE("zip: a local header without its signature is invalid") {
  auto built = torch_like();
  build::poke_le32(built.bytes, built.records[1].local_header + lf::kSignature, 0);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipLocalHeaderInvalid);
  CHECK(result.record == "l/data/0");
  CHECK(result.offset == built.records[1].local_header);
}

TEST_CASE("zip: a local header naming another record is a mismatch") {
  auto records = kRecords;
  records[1].local_name = "l/data/1";
  const auto built = build::build(records);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipLocalHeaderMismatch);
  CHECK(result.record == "l/data/0");
  CHECK(result.offset == built.records[1].local_header + lf::kName);
}

TEST_CASE("zip: a local header pointing at another record's header is a mismatch") {
  auto built = torch_like();
  build::poke_le32(built.bytes, built.records[2].central_header + cf::kLocalHeaderOffset,
                   built.records[1].local_header);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipLocalHeaderMismatch);
}

TEST_CASE("zip: a local method different from the central one is a mismatch") {
  auto built = torch_like();
  build::poke_le16(built.bytes, built.records[0].local_header + lf::kMethod, 8);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipLocalHeaderMismatch);
  CHECK(result.offset == built.records[0].local_header + lf::kMethod);
}

TEST_CASE("zip: local encryption flags different from the central ones are a mismatch") {
  auto built = torch_like();
  build::poke_le16(built.bytes, built.records[0].local_header + lf::kFlags, 0x0809);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipLocalHeaderMismatch);
}

TEST_CASE("zip: with flag bit 3 the local sizes and CRC are not compared") {
  auto built = torch_like();
  for (const auto field : {lf::kCrc, lf::kCompressedSize, lf::kSize}) {
    build::poke_le32(built.bytes, built.records[1].local_header + field, 12345);
  }
  CHECK(parse_outcome(built.bytes).code == Errc::kOk);
}

TEST_CASE("zip: without flag bit 3, local sizes and CRC must match the central directory") {
  for (const auto field : {lf::kCrc, lf::kCompressedSize, lf::kSize}) {
    auto built = plain();
    const auto header = built.records[1].local_header;
    build::poke_le32(built.bytes, header + field, build::peek(built.bytes, header + field, 4) + 1);
    const auto result = parse_outcome(built.bytes);
    CHECK(result.code == Errc::kZipLocalHeaderMismatch);
    CHECK(result.offset == header + field);
  }
}

TEST_CASE("zip: without flag bit 3, zero local sizes are not compared") {
  auto built = plain();
  for (const auto field : {lf::kCrc, lf::kCompressedSize, lf::kSize}) {
    build::poke_le32(built.bytes, built.records[1].local_header + field, 0);
  }
  CHECK(parse_outcome(built.bytes).code == Errc::kOk);
}

TEST_CASE("zip: the payload offset follows the local extra length, not the central one") {
  auto built = torch_like();
  const auto archive = Archive::parse(built.bytes);
  CHECK(build::peek(built.bytes, built.records[1].central_header + cf::kExtraLength, 2) == 0);
  CHECK(build::peek(built.bytes, built.records[1].local_header + lf::kExtraLength, 2) > 0);
  CHECK(archive.entries()[1].data_offset == built.records[1].data);
}

TEST_CASE("zip: a local extra field running past the end of file is out of bounds") {
  auto built = torch_like();
  build::poke_le32(built.bytes, built.records[2].central_header + cf::kLocalHeaderOffset,
                   built.end_record - 40);
  // Whatever lies there is not a local header; make it one whose extra runs off the end.
  build::poke_le32(built.bytes, built.end_record - 40, 0x04034b50);
  CHECK(parse_outcome(built.bytes).code != Errc::kOk);
  built = torch_like();
  build::poke_le16(built.bytes, built.records[2].local_header + lf::kExtraLength, 0xFFFF);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipRecordOutOfBounds);
  CHECK(result.record == "l/version");
}

TEST_CASE("zip: a local header cut short by the bytes given is truncated there, not read past") {
  // What a reader holding a window of the file (zip/image.hpp) hands resolve_local_header. The
  // windows are copies of exactly their size: AddressSanitizer reports a read past them.
  const auto built = torch_like();
  pthload::zip::Entry entry = Archive::parse(built.bytes).entries()[1];
  const std::uint64_t header = built.records[1].local_header;
  struct Cut {
    std::size_t kept;
    std::uint64_t reported_at;  // where the field that does not fit starts
  };
  for (const Cut cut : {Cut{20, lf::kCompressedSize}, Cut{lf::kName + 3, lf::kName}}) {
    CAPTURE(cut.kept);
    const std::vector<std::byte> window(
        built.bytes.begin() + static_cast<std::ptrdiff_t>(header),
        built.bytes.begin() + static_cast<std::ptrdiff_t>(header + cut.kept));
    const auto error = error_thrown<pthload::FormatError>(
        [&] { pthload::zip::resolve_local_header(window, built.bytes.size(), entry); });
    CHECK(error.code() == Errc::kZipRecordOutOfBounds);
    CHECK(error.context().record == "l/data/0");
    CHECK(error.context().offset == header + cut.reported_at);
  }
}

TEST_SUITE_END();
TEST_SUITE_BEGIN("layout");

TEST_CASE("zip: a payload running into the next record overlaps it") {
  auto built = torch_like();
  // Stored sizes are only compared on read: parse sees a record reaching into the next one.
  const auto size = built.records[1].local_header - built.records[0].data + 1;
  build::poke_le32(built.bytes, built.records[0].central_header + cf::kCompressedSize, size);
  build::poke_le32(built.bytes, built.records[0].central_header + cf::kSize, size);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipRecordsOverlap);
  CHECK(result.record == "l/data/0");
  CHECK(result.offset == built.records[1].local_header);
}

TEST_CASE("zip: a payload containing another whole record overlaps it") {
  auto built = torch_like();
  const auto size = built.records[2].data + 2 - built.records[0].data;
  build::poke_le32(built.bytes, built.records[0].central_header + cf::kCompressedSize, size);
  build::poke_le32(built.bytes, built.records[0].central_header + cf::kSize, size);
  CHECK(parse_outcome(built.bytes).code == Errc::kZipRecordsOverlap);
}

TEST_CASE("zip: a payload running into the central directory overlaps it") {
  auto built = build::build(kRecords, {.data_descriptor = false});
  const auto size = built.central_directory + 1 - built.records[2].data;
  build::poke_le32(built.bytes, built.records[2].central_header + cf::kCompressedSize, size);
  build::poke_le32(built.bytes, built.records[2].central_header + cf::kSize, size);
  // Sizes are compared with the local header's without bit 3; zero them there.
  build::poke_le32(built.bytes, built.records[2].local_header + lf::kCompressedSize, 0);
  build::poke_le32(built.bytes, built.records[2].local_header + lf::kSize, 0);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipRecordsOverlap);
  CHECK(result.record == "l/version");
  CHECK(result.offset == built.central_directory);
}

TEST_CASE("zip: records listed out of file order are checked in file order") {
  // The central directory lists l/data/0 before l/data.pkl, and l/data/0 runs into l/version:
  // the overlap is reported as for records in order, naming the later one in the file.
  auto built = torch_like();
  const auto size = built.records[2].local_header - built.records[1].data + 1;
  build::poke_le32(built.bytes, built.records[1].central_header + cf::kCompressedSize, size);
  build::poke_le32(built.bytes, built.records[1].central_header + cf::kSize, size);
  const auto first = static_cast<std::ptrdiff_t>(built.records[0].central_header);
  const auto second = static_cast<std::ptrdiff_t>(built.records[1].central_header);
  const auto third = static_cast<std::ptrdiff_t>(built.records[2].central_header);
  std::vector<std::byte> swapped(built.bytes.begin(), built.bytes.begin() + first);
  swapped.insert(swapped.end(), built.bytes.begin() + second, built.bytes.begin() + third);
  swapped.insert(swapped.end(), built.bytes.begin() + first, built.bytes.begin() + second);
  swapped.insert(swapped.end(), built.bytes.begin() + third, built.bytes.end());
  REQUIRE(swapped.size() == built.bytes.size());
  const auto result = parse_outcome(swapped);
  CHECK(result.code == Errc::kZipRecordsOverlap);
  CHECK(result.record == "l/version");
  CHECK(result.offset == built.records[2].local_header);
  CHECK(result.message.find("record \"l/version\"") != std::string::npos);
  CHECK(result.message.find("overlaps record \"l/data/0\"") != std::string::npos);
}

TEST_CASE("zip: a record hidden in the archive comment overlaps the end record") {
  const auto forged =
      build::build({{.name = "l/version", .data = "3\n"}}, {.zip64_end = false, .alignment = 0});
  const std::string comment = text_of(std::span(forged.bytes).first(30 + 9 + 2));
  auto built = build::build(kRecords, {.comment = comment});
  build::poke_le32(built.bytes, built.records[2].central_header + cf::kLocalHeaderOffset,
                   built.end_record + 22);
  const auto result = parse_outcome(built.bytes);
  CHECK(result.code == Errc::kZipRecordsOverlap);
  CHECK(result.record == "l/version");
  CHECK(result.offset == built.end_record + 22);
}

TEST_SUITE_END();
