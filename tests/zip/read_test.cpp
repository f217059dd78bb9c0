// Record contents: methods, encryption, inflation limits, CRC: one corruption per case.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/error_code.hpp"
#include "support/zip_builder.hpp"
#include "zip/archive.hpp"
#include "zip/inflate.hpp"
#include "zip/zip_test_support.hpp"

using pthload::Errc;
using pthload::test::read_outcome;
using pthload::zip::Archive;
namespace build = pthload::test::zip_build;
namespace lf = build::local_field;
namespace cf = build::central_field;

namespace {
const std::string kText =
    "It is a truth universally acknowledged, that a single checkpoint in possession of good "
    "weights, must be in want of a loader. It is a truth universally acknowledged.";
const std::vector<build::Record> kRecords = {
    {.name = "r/data.pkl", .data = "\x80\x02K\x01."},
    {.name = "r/text", .data = kText, .deflate = true},
};
build::Built torch_like() {
  return build::build(kRecords);
}

void set_both(build::Built& built, std::size_t record, std::uint64_t local_field,
              std::uint64_t central_field, unsigned width, std::uint64_t value) {
  build::poke(built.bytes, built.records[record].local_header + local_field, width, value);
  build::poke(built.bytes, built.records[record].central_header + central_field, width, value);
}
}  // namespace

TEST_SUITE_BEGIN("data");

TEST_CASE("zip: other compression methods are unsupported, named by number and name") {
  for (const auto& [method, name] : std::vector<std::pair<int, std::string>>{
           {12, "bzip2"}, {14, "lzma"}, {93, "zstd"}, {9, "deflate64"}, {77, ""}}) {
    auto built = torch_like();
    set_both(built, 1, lf::kMethod, cf::kMethod, 2, method);
    // parse() checks structure only: the record can still be listed.
    const auto archive = Archive::parse(built.bytes);
    CHECK(archive.entries()[1].method == method);
    const auto result = read_outcome(built.bytes, "r/text");
    CHECK(result.code == Errc::kZipUnsupportedMethod);
    CHECK(result.unsupported);
    CHECK(result.record == "r/text");
    CHECK(result.message.find("method " + std::to_string(method)) != std::string::npos);
    CHECK(result.message.find(name) != std::string::npos);
  }
}

TEST_CASE("zip: encrypted records are unsupported") {
  for (const std::uint64_t flags : {0x0809u, 0x0848u}) {
    auto built = torch_like();
    set_both(built, 0, lf::kFlags, cf::kFlags, 2, flags);
    const auto result = read_outcome(built.bytes, "r/data.pkl");
    CHECK(result.code == Errc::kZipEncrypted);
    CHECK(result.unsupported);
    CHECK(result.record == "r/data.pkl");
  }
}

TEST_CASE("zip: a stored record whose two sizes differ is invalid") {
  auto built = torch_like();
  build::poke_le32(built.bytes, built.records[0].central_header + cf::kSize, 6);
  const auto result = read_outcome(built.bytes, "r/data.pkl");
  CHECK(result.code == Errc::kZipCentralDirectoryEntryInvalid);
  CHECK(result.offset == built.records[0].central_header);
}

TEST_CASE("zip: a deflated record must inflate to exactly its declared size") {
  for (const std::int64_t delta : {-1, 1}) {
    auto built = torch_like();
    build::poke_le32(built.bytes, built.records[1].central_header + cf::kSize,
                     kText.size() + delta);
    const auto result = read_outcome(built.bytes, "r/text");
    CHECK(result.code == Errc::kZipInflatedSizeMismatch);
    CHECK(result.record == "r/text");
    CHECK(result.offset == built.records[1].data);
  }
}

TEST_CASE("zip: corrupt deflate data fails to inflate") {
  auto built = torch_like();
  build::poke_le32(built.bytes, built.records[1].data, 0xFFFF'FFFF);
  CHECK(read_outcome(built.bytes, "r/text").code == Errc::kZipInflateFailed);
}

TEST_CASE("zip: a declared size the compressed bytes cannot produce is refused") {
  auto built = torch_like();
  const auto compressed =
      build::peek(built.bytes, built.records[1].central_header + cf::kCompressedSize, 4);
  build::poke_le32(built.bytes, built.records[1].central_header + cf::kSize,
                   compressed * pthload::zip::kMaxDeflateRatio + 65);
  CHECK(read_outcome(built.bytes, "r/text").code == Errc::kZipImplausibleCompressionRatio);
}

TEST_CASE("zip: a deflate bomb is refused by max_inflated_record_bytes before allocating") {
  const auto built =
      build::build({{.name = "b/zeros", .data = std::string(4 << 20, '\0'), .deflate = true}});
  CHECK(built.bytes.size() < 8192);
  CHECK(read_outcome(built.bytes, "b/zeros", false, {.max_inflated_record_bytes = 1 << 20}).code ==
        Errc::kZipLimitExceeded);
  CHECK(read_outcome(built.bytes, "b/zeros", true).code == Errc::kOk);
}

TEST_CASE("zip: CRC-32 is checked only on request") {
  auto built = torch_like();
  build::poke_le32(built.bytes, built.records[1].central_header + cf::kCrc, 0x1234'5678);
  build::poke_le32(built.bytes, built.records[0].data, 0);  // a stored record's payload
  const auto archive = Archive::parse(built.bytes);
  for (const auto& entry : archive.entries())
    (void)archive.read(entry);
  for (const auto& entry : archive.entries()) {
    const auto result = pthload::test::read_outcome(built.bytes, entry.name, true);
    CHECK(result.code == Errc::kZipCrcMismatch);
    CHECK(result.record == entry.name);
    CHECK(result.offset == entry.data_offset);
  }
  CHECK_THROWS_AS(archive.verify_crc(archive.entries()[1]), pthload::FormatError);
}

TEST_CASE("zip: a stored record that is its own empty payload reads as empty") {
  const auto built = build::build({{.name = "e/data/0", .data = ""}});
  const auto archive = Archive::parse(built.bytes);
  const auto record = archive.read(archive.entries()[0], true);
  CHECK(record.is_view());
  CHECK(record.bytes().empty());
}

TEST_CASE("zip: an Entry not from this archive cannot read outside the file") {
  const auto built = torch_like();
  const auto archive = Archive::parse(built.bytes);
  auto entry = archive.entries()[0];
  entry.data_offset = built.bytes.size() - 2;
  CHECK(pthload::test::error_code_of([&] { (void)archive.read(entry); }) ==
        Errc::kZipRecordOutOfBounds);
}

TEST_SUITE_END();
