// Records read through one handle (pthload::RecordReader, pthload_records_*), against the zip
// fixtures Python's zipfile wrote (tests/fixtures/make_zip_fixtures.py): deflated.zip and
// stored.zip hold the same records, one deflated, one stored.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "pthload/error.hpp"
#include "pthload/pthload.h"
#include "pthload/records.hpp"

namespace {

std::string zip_fixture(const char* name) {
  return std::string(PTHLOAD_FIXTURES_DIR) + "/zip/" + name;
}

std::vector<std::byte> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::byte> bytes(chars.size());
  std::transform(chars.begin(), chars.end(), bytes.begin(),
                 [](char c) { return static_cast<std::byte>(c); });
  return bytes;
}

template <typename F>
pthload::Errc code_of(F&& body) {
  try {
    body();
  } catch (const pthload::Error& e) {
    return e.code();
  }
  FAIL("no pthload::Error was thrown");
  return pthload::Errc{};
}

// What make_zip_fixtures.py wrote into both archives (tests/fixtures/zip/MANIFEST.txt).
struct Expected {
  const char* name;
  std::uint64_t size;
  std::uint32_t crc32;
};
constexpr Expected kRecords[] = {{"archive/data.pkl", 17, 0xc7c434e3},
                                 {"archive/data/0", 256, 0x29058c73},
                                 {"archive/data/1", 1000, 0xf02fcae2},
                                 {"archive/empty", 0, 0x00000000},
                                 {"archive/version", 2, 0x55679ed1}};

struct RecordsDeleter {
  void operator()(pthload_records* records) const { pthload_records_free(records); }
};
using RecordsPtr = std::unique_ptr<pthload_records, RecordsDeleter>;

}  // namespace

TEST_SUITE("fixtures") {
  TEST_CASE("records: a RecordReader lists what the central directory says, in its order") {
    for (const char* name : {"deflated.zip", "stored.zip"}) {
      CAPTURE(name);
      const auto reader = pthload::RecordReader::open(zip_fixture(name));
      const auto list = reader.list();
      REQUIRE(list.size() == std::size(kRecords));
      for (std::size_t i = 0; i < list.size(); ++i) {
        CHECK(list[i].name == kRecords[i].name);
        CHECK(list[i].size == kRecords[i].size);
        CHECK(list[i].crc32 == kRecords[i].crc32);
        CHECK(list[i].is_compressed == (std::string(name) == "deflated.zip"));
        CHECK(reader.find(kRecords[i].name) == &list[i]);
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
    CHECK(code_of([&] { (void)reader.read("archive/nope"); }) == pthload::Errc::kZipRecordNotFound);
    try {
      (void)reader.read("archive/nope");
    } catch (const pthload::Error& e) {
      CHECK(e.context().path == path);
    }
    CHECK(code_of([&] { (void)pthload::read_record(path, "archive/nope"); }) ==
          pthload::Errc::kZipRecordNotFound);
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
    try {
      (void)from_memory.read("archive/nope");
      FAIL("no error");
    } catch (const pthload::Error& e) {
      CHECK(e.context().path == "<memory>");
    }
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
    CHECK(code_of([&] { unchecked.verify_crc("archive/data/1"); }) ==
          pthload::Errc::kZipCrcMismatch);
    unchecked.verify_crc("archive/data/0");

    const auto checked = pthload::RecordReader::open(std::span(bytes), {.verify_crc = true});
    CHECK(code_of([&] { (void)checked.read("archive/data/1"); }) == pthload::Errc::kZipCrcMismatch);
    CHECK(checked.read("archive/data/0").size() == 256);
  }

  TEST_CASE("records: list_records and read_record are the reader's answers") {
    const std::string path = zip_fixture("deflated.zip");
    const auto reader = pthload::RecordReader::open(path);
    const auto listed = pthload::list_records(path, {.verify_crc = true});
    REQUIRE(listed.size() == reader.list().size());
    for (std::size_t i = 0; i < listed.size(); ++i) {
      CHECK(listed[i].name == reader.list()[i].name);
      CHECK(listed[i].compressed_size == reader.list()[i].compressed_size);
      CHECK(pthload::read_record(path, listed[i].name) == reader.read(listed[i].name));
    }
  }

  TEST_CASE("capi: pthload_records_* list, find and read records through one handle") {
    pthload_records* raw = nullptr;
    REQUIRE(pthload_records_open(zip_fixture("deflated.zip").c_str(), nullptr, &raw) == PTHLOAD_OK);
    const RecordsPtr records(raw);
    const auto reader = pthload::RecordReader::open(zip_fixture("deflated.zip"));
    REQUIRE(pthload_records_count(records.get()) == std::size(kRecords));
    for (std::size_t i = 0; i < std::size(kRecords); ++i) {
      CAPTURE(kRecords[i].name);
      pthload_record_info info{};
      REQUIRE(pthload_records_info(records.get(), i, &info) == PTHLOAD_OK);
      CHECK(std::string(info.name) == kRecords[i].name);
      CHECK(info.size == kRecords[i].size);
      CHECK(info.crc32 == kRecords[i].crc32);
      CHECK(info.is_compressed == 1);
      CHECK(info.compressed_size == reader.list()[i].compressed_size);
      std::size_t index = 99;
      REQUIRE(pthload_records_find(records.get(), kRecords[i].name, &index) == PTHLOAD_OK);
      CHECK(index == i);
      std::vector<std::byte> buffer(info.size + 3, std::byte{0xee});
      REQUIRE(pthload_records_read(records.get(), i, buffer.data(), buffer.size()) == PTHLOAD_OK);
      const auto expected = reader.read(kRecords[i].name);
      CHECK(std::equal(expected.begin(), expected.end(), buffer.begin()));
      CHECK(buffer.back() == std::byte{0xee});  // nothing past the record's size
      if (info.size > 0) {
        CHECK(pthload_records_read(records.get(), i, buffer.data(), info.size - 1) ==
              PTHLOAD_ERROR_INVALID_ARGUMENT);
      }
    }
    pthload_record_info info{};
    CHECK(pthload_records_info(records.get(), std::size(kRecords), &info) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
    std::size_t index = 0;
    CHECK(pthload_records_find(records.get(), "archive/nope", &index) ==
          static_cast<int>(pthload::Errc::kZipRecordNotFound));
    CHECK(std::string(pthload_last_error()->code_name) == "ZipRecordNotFound");
  }

  TEST_CASE("capi: pthload_records_open_bytes, verify_crc and failures") {
    auto bytes = file_bytes(zip_fixture("stored.zip"));
    pthload_options options;
    pthload_options_init(&options);
    options.verify_crc = 1;
    pthload_records* raw = nullptr;
    REQUIRE(pthload_records_open_bytes(bytes.data(), bytes.size(), &options, &raw) == PTHLOAD_OK);
    const RecordsPtr records(raw);
    std::size_t index = 0;
    REQUIRE(pthload_records_find(records.get(), "archive/data/1", &index) == PTHLOAD_OK);
    pthload_record_info info{};
    REQUIRE(pthload_records_info(records.get(), index, &info) == PTHLOAD_OK);
    std::vector<std::byte> buffer(info.size);
    CHECK(pthload_records_read(records.get(), index, buffer.data(), buffer.size()) == PTHLOAD_OK);
    bytes[info.payload_offset] ^= std::byte{0x01};  // read in place: the handle sees the change
    CHECK(pthload_records_read(records.get(), index, buffer.data(), buffer.size()) ==
          static_cast<int>(pthload::Errc::kZipCrcMismatch));
    CHECK(std::string(pthload_last_error()->path) == "<memory>");

    pthload_records* none = reinterpret_cast<pthload_records*>(&none);
    CHECK(pthload_records_open(nullptr, nullptr, &none) == PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(none == nullptr);
    CHECK(pthload_records_open(zip_fixture("no_such.zip").c_str(), nullptr, &none) != PTHLOAD_OK);
    CHECK(none == nullptr);
    CHECK(pthload_records_open_bytes(nullptr, 3, nullptr, &none) == PTHLOAD_ERROR_INVALID_ARGUMENT);
    const char not_zip[] = "not a zip archive at all, long enough to be searched for an EOCD";
    CHECK(pthload_records_open_bytes(not_zip, sizeof not_zip, nullptr, &none) / 100 == 2);
    CHECK(none == nullptr);
    pthload_records_free(nullptr);
  }
}
