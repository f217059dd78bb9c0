// pthload::RecordReader (lib/audit/records.cpp): records read through one handle, against the zip
// fixtures Python's zipfile wrote (tests/fixtures/make_zip_fixtures.py): deflated.zip and
// stored.zip hold the same records, one deflated, one stored. The same through the C API:
// tests/capi/records_test.cpp.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "pthload/error.hpp"
#include "pthload/records.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "support/zip_fixtures.hpp"

using pthload::test::error_thrown;
using pthload::test::file_bytes;
using pthload::test::kZipFixtureRecords;
using pthload::test::zip_fixture;

TEST_SUITE("fixtures") {
  TEST_CASE("records: a RecordReader lists what the central directory says, in its order") {
    for (const char* name : {"deflated.zip", "stored.zip"}) {
      CAPTURE(name);
      const auto reader = pthload::RecordReader::open(zip_fixture(name));
      const auto list = reader.list();
      REQUIRE(list.size() == std::size(kZipFixtureRecords));
      for (std::size_t i = 0; i < list.size(); ++i) {
        CHECK(list[i].name == kZipFixtureRecords[i].name);
        CHECK(list[i].size == kZipFixtureRecords[i].size);
        CHECK(list[i].crc32 == kZipFixtureRecords[i].crc32);
        CHECK(list[i].is_compressed == (std::string(name) == "deflated.zip"));
        CHECK(reader.find(kZipFixtureRecords[i].name) == &list[i]);
      }
      CHECK(reader.find("archive/data/2") == nullptr);
      CHECK(reader.find("archive/data") == nullptr);
    }
  }

  TEST_CASE("records: read() inflates a deflated record to the stored record's bytes") {
    const std::string stored_path = zip_fixture("stored.zip");
    const auto stored_file = file_bytes(stored_path);
    const auto stored = pthload::RecordReader::open(stored_path);
    const auto deflated = pthload::RecordReader::open(zip_fixture("deflated.zip"));
    for (const pthload::RecordInfo& record : stored.list()) {
      CAPTURE(record.name);
      // A stored record's bytes are the file's, where the central directory says.
      const auto offset = static_cast<std::ptrdiff_t>(record.payload_offset);
      const std::vector<std::byte> in_file(
          stored_file.begin() + offset,
          stored_file.begin() + offset + static_cast<std::ptrdiff_t>(record.size));
      CHECK(stored.read(record.name) == in_file);
      CHECK(deflated.read(record.name) == in_file);
      // Reading again from the same handle gives the same bytes (nothing consumed, no state).
      CHECK(deflated.read(record.name) == in_file);
      deflated.verify_crc(record.name);
    }
  }

  TEST_CASE("records: a missing record is kZipRecordNotFound, naming the file") {
    const std::string path = zip_fixture("deflated.zip");
    const auto reader = pthload::RecordReader::open(path);
    const auto missing = error_thrown([&] { (void)reader.read("archive/nope"); });
    CHECK(missing.code() == pthload::Errc::kZipRecordNotFound);
    CHECK(missing.context().path == path);
    CHECK(reader.find("archive/nope") == nullptr);
  }

  TEST_CASE("records: a RecordReader over bytes in memory reads them in place") {
    const auto bytes = file_bytes(zip_fixture("stored.zip"));
    const auto from_memory = pthload::RecordReader::open(std::span(bytes));
    const auto from_file = pthload::RecordReader::open(zip_fixture("stored.zip"));
    REQUIRE(from_memory.list().size() == from_file.list().size());
    for (std::size_t i = 0; i < from_file.list().size(); ++i) {
      const auto& record = from_file.list()[i];
      CHECK(from_memory.list()[i].name == record.name);
      CHECK(from_memory.list()[i].payload_offset == record.payload_offset);
      CHECK(from_memory.read(record.name) == from_file.read(record.name));
    }
    const auto e = error_thrown<pthload::Error>([&] { (void)from_memory.read("archive/nope"); });
    CHECK(e.context().path == "<memory>");
  }

  TEST_CASE("records: with verify_crc, read() refuses a record whose bytes changed") {
    auto bytes = file_bytes(zip_fixture("stored.zip"));
    const pthload::RecordInfo* data1 = nullptr;
    const auto original = pthload::RecordReader::open(std::span(bytes));
    data1 = original.find("archive/data/1");
    REQUIRE(data1 != nullptr);
    const std::uint64_t offset = data1->payload_offset;
    bytes[offset] ^= std::byte{0x01};  // the central directory's CRC no longer matches

    const auto unchecked = pthload::RecordReader::open(std::span(bytes));
    const auto changed = unchecked.read("archive/data/1");
    REQUIRE(changed.size() == 1000);
    CHECK(changed[0] == bytes[offset]);  // read as it is: torch never checks CRCs
    CHECK(error_thrown([&] { unchecked.verify_crc("archive/data/1"); }).code() ==
          pthload::Errc::kZipCrcMismatch);
    unchecked.verify_crc("archive/data/0");

    const auto checked = pthload::RecordReader::open(std::span(bytes), {.verify_crc = true});
    CHECK(error_thrown([&] { (void)checked.read("archive/data/1"); }).code() ==
          pthload::Errc::kZipCrcMismatch);
    CHECK(checked.read("archive/data/0").size() == 256);
  }

  TEST_CASE(
      "records: verify_all reads every record once, and a file truncated since open() is a "
      "problem, not SIGBUS") {
    const std::string source = zip_fixture("stored.zip");
    const std::string path = "records_test_truncated.zip";
    std::filesystem::copy_file(source, path, std::filesystem::copy_options::overwrite_existing);
    const auto reader = pthload::RecordReader::open(path);
    std::uint64_t read = 0;
    std::uint64_t compressed = 0;
    for (const auto& record : reader.list())
      compressed += record.compressed_size;
    CHECK(reader.verify_all([&](std::uint64_t n) { read += n; }).empty());
    CHECK(read == compressed);
    // Cut the file inside the first record's bytes: every record with bytes is then a problem
    // (the archive's empty record has none to read, and its CRC-32 is 0's).
    std::filesystem::resize_file(path, reader.list().front().payload_offset + 1);
    const auto problems = reader.verify_all();
    std::size_t with_bytes = 0;
    for (const auto& record : reader.list())
      with_bytes += record.compressed_size > 0 ? 1 : 0;
    REQUIRE(with_bytes == reader.list().size() - 1);
    REQUIRE(problems.size() == with_bytes);
    CHECK(problems.front().record == reader.list().front().name);
    CHECK(problems.front().message.find(path) != std::string::npos);
    std::filesystem::remove(path);
  }
}
