// Archive over well-formed inputs: entries, lookup, stored views, inflated buffers, comments.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/bytes.hpp"
#include "support/error_code.hpp"
#include "support/zip_builder.hpp"
#include "zip/archive.hpp"

using pthload::Errc;
using pthload::test::error_thrown;
using pthload::test::text_of;
using pthload::zip::Archive;
namespace build = pthload::test::zip_build;

namespace {
const std::vector<build::Record> kTorchLike = {
    {.name = "tiny/data.pkl", .data = "\x80\x02}q\x00.", .deflate = false},
    {.name = "tiny/data/0", .data = std::string(40, '\x01'), .deflate = false},
    {.name = "tiny/version", .data = "3\n", .deflate = false},
};
}  // namespace

TEST_CASE("zip: a torch-like archive lists its entries in central-directory order") {
  const auto built = build::build(kTorchLike);
  const auto archive = Archive::parse(built.bytes);
  REQUIRE(archive.entries().size() == 3);
  CHECK(archive.is_zip64());
  CHECK(archive.comment().empty());
  CHECK(archive.end_of_central_directory_offset() == built.end_record);
  CHECK(archive.central_directory_offset() == built.central_directory);
  for (std::size_t i = 0; i < kTorchLike.size(); ++i) {
    const auto& entry = archive.entries()[i];
    CHECK(entry.name == kTorchLike[i].name);
    CHECK(entry.method == 0);
    CHECK(entry.flags == 0x0808);
    CHECK(entry.uncompressed_size == kTorchLike[i].data.size());
    CHECK(entry.compressed_size == kTorchLike[i].data.size());
    CHECK(entry.local_header_offset == built.records[i].local_header);
    CHECK(entry.central_directory_offset == built.records[i].central_header);
    // The payload offset comes from the local header's extra length: torch's FB padding.
    CHECK(entry.data_offset == built.records[i].data);
    CHECK(entry.data_offset % 64 == 0);
  }
}

TEST_CASE("zip: stored records are zero-copy views into the file") {
  const auto built = build::build(kTorchLike);
  const auto archive = Archive::parse(built.bytes);
  const auto record = archive.read(archive.at("tiny/data/0"));
  CHECK(record.is_view());
  CHECK(record.bytes().data() == built.bytes.data() + built.records[1].data);
  CHECK(text_of(record.bytes()) == kTorchLike[1].data);
  auto buffer = Archive::parse(built.bytes).read(archive.at("tiny/version")).take_buffer();
  CHECK(text_of(buffer.span()) == "3\n");
}

TEST_CASE("zip: deflated records are inflated into an owned aligned buffer") {
  const std::string text(5000, 'x');
  const auto built = build::build({{.name = "a/big.txt", .data = text, .deflate = true},
                                   {.name = "a/empty", .data = "", .deflate = true}});
  const auto archive = Archive::parse(built.bytes);
  const auto& entry = archive.at("a/big.txt");
  CHECK(entry.method == 8);
  CHECK(entry.compressed_size < text.size());
  auto record = archive.read(entry, true);
  CHECK_FALSE(record.is_view());
  CHECK(reinterpret_cast<std::uintptr_t>(record.bytes().data()) % 64 == 0);
  CHECK(text_of(record.bytes()) == text);
  const auto* data = record.bytes().data();
  auto buffer = std::move(record).take_buffer();
  CHECK(buffer.data() == data);  // the inflated buffer itself, not a copy
  CHECK(archive.read(archive.at("a/empty"), true).bytes().empty());
}

TEST_CASE("zip: find and at look names up exactly") {
  const auto built = build::build(kTorchLike);
  const auto archive = Archive::parse(built.bytes);
  REQUIRE(archive.find("tiny/version") != nullptr);
  CHECK(archive.find("tiny/version")->name == "tiny/version");
  CHECK(archive.find("tiny/versio") == nullptr);
  CHECK(archive.find("tiny/version\n") == nullptr);
  CHECK(archive.find("") == nullptr);
  CHECK(&archive.at("tiny/data.pkl") == &archive.entries()[0]);
  const auto missing =
      error_thrown<pthload::FormatError>([&] { (void)archive.at("archive/data.pkl"); });
  CHECK(missing.code() == Errc::kZipRecordNotFound);
  CHECK(missing.context().record == "archive/data.pkl");
}

TEST_CASE("zip: a copied archive keeps working after the original is gone") {
  const auto built = build::build(kTorchLike);
  std::optional<Archive> copy;
  {
    const auto original = Archive::parse(built.bytes);
    copy = original;
  }
  CHECK(text_of(copy->read(copy->at("tiny/version")).bytes()) == "3\n");
}

TEST_CASE("zip: many entries are indexed and found") {
  std::vector<build::Record> records;
  for (int i = 0; i < 3000; ++i) {
    records.push_back({.name = "m/data/" + std::to_string(i), .data = std::to_string(i)});
  }
  const auto built = build::build(records, {.alignment = 0});
  const auto archive = Archive::parse(built.bytes);
  CHECK(archive.entries().size() == 3000);
  for (int i = 0; i < 3000; i += 7) {
    const auto* entry = archive.find("m/data/" + std::to_string(i));
    REQUIRE(entry != nullptr);
    CHECK(text_of(archive.read(*entry).bytes()) == std::to_string(i));
  }
}

TEST_CASE("zip: the archive comment is exposed and tolerated") {
  const auto built = build::build(kTorchLike, {.comment = "a comment, with bytes \x01\x02"});
  const auto archive = Archive::parse(built.bytes);
  CHECK(archive.comment() == "a comment, with bytes \x01\x02");
  CHECK(archive.end_of_central_directory_offset() == built.end_record);
}

TEST_CASE("zip: an archive without zip64 records or padding parses") {
  const auto built =
      build::build(kTorchLike, {.zip64_end = false, .data_descriptor = false, .alignment = 0});
  const auto archive = Archive::parse(built.bytes);
  CHECK_FALSE(archive.is_zip64());
  CHECK(archive.entries()[1].data_offset == built.records[1].data);
  for (const auto& entry : archive.entries())
    archive.verify_crc(entry);
}

TEST_CASE("zip: an empty archive has no entries") {
  for (const bool zip64 : {false, true}) {
    const auto built = build::build({}, {.zip64_end = zip64});
    const auto archive = Archive::parse(built.bytes);
    CHECK(archive.entries().empty());
    CHECK(archive.find("x") == nullptr);
  }
}
