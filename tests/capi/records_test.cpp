// pthload_records_*: records read through one handle from C, against the zip fixtures Python's
// zipfile wrote (tests/fixtures/make_zip_fixtures.py) and the C++ RecordReader over them, through
// the shared library. The RecordReader itself: tests/audit/records_test.cpp.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pthload/error.hpp"
#include "pthload/pthload.h"
#include "pthload/records.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "support/zip_fixtures.hpp"

using pthload::test::error_thrown;
using pthload::test::file_bytes;
using pthload::test::kZipFixtureRecords;
using pthload::test::zip_fixture;

namespace {

struct RecordsDeleter {
  void operator()(pthload_records* records) const { pthload_records_free(records); }
};
using RecordsPtr = std::unique_ptr<pthload_records, RecordsDeleter>;

}  // namespace

TEST_SUITE("fixtures") {
  TEST_CASE("capi: pthload_records_* list, find and read records through one handle") {
    pthload_records* raw = nullptr;
    REQUIRE(pthload_records_open(zip_fixture("deflated.zip").c_str(), nullptr, &raw) == PTHLOAD_OK);
    const RecordsPtr records(raw);
    const auto reader = pthload::RecordReader::open(zip_fixture("deflated.zip"));
    REQUIRE(pthload_records_count(records.get()) == std::size(kZipFixtureRecords));
    for (std::size_t i = 0; i < std::size(kZipFixtureRecords); ++i) {
      CAPTURE(kZipFixtureRecords[i].name);
      pthload_record_info info{.struct_size = sizeof(pthload_record_info)};
      REQUIRE(pthload_records_info(records.get(), i, &info) == PTHLOAD_OK);
      CHECK(info.struct_size == PTHLOAD_RECORD_INFO_SIZE_V1);
      CHECK(std::string(info.name) == kZipFixtureRecords[i].name);
      CHECK(info.size == kZipFixtureRecords[i].size);
      CHECK(info.crc32 == kZipFixtureRecords[i].crc32);
      CHECK(info.is_compressed == 1);
      CHECK(info.compressed_size == reader.list()[i].compressed_size);
      std::size_t index = 99;
      REQUIRE(pthload_records_find(records.get(), kZipFixtureRecords[i].name, &index) ==
              PTHLOAD_OK);
      CHECK(index == i);
      std::vector<std::byte> buffer(info.size + 3, std::byte{0xee});
      REQUIRE(pthload_records_read(records.get(), i, buffer.data(), buffer.size()) == PTHLOAD_OK);
      const auto expected = reader.read(kZipFixtureRecords[i].name);
      CHECK(std::equal(expected.begin(), expected.end(), buffer.begin()));
      CHECK(buffer.back() == std::byte{0xee});  // nothing past the record's size
      if (info.size > 0) {
        CHECK(pthload_records_read(records.get(), i, buffer.data(), info.size - 1) ==
              PTHLOAD_ERROR_INVALID_ARGUMENT);
      }
    }
    pthload_record_info info{.struct_size = sizeof(pthload_record_info)};
    CHECK(pthload_records_info(records.get(), std::size(kZipFixtureRecords), &info) ==
          PTHLOAD_ERROR_INVALID_ARGUMENT);
    // A struct whose size was never set is refused, and nothing is written to it.
    pthload_record_info unset{};
    CHECK(pthload_records_info(records.get(), 0, &unset) == PTHLOAD_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(pthload_last_error()->message).find("struct_size is 0") != std::string::npos);
    CHECK(unset.name == nullptr);
    // A caller's struct larger than the library's (a newer header): the library's fields are
    // written, struct_size says how far, and the caller's bytes past them are left as they were.
    struct NewerRecordInfo {
      pthload_record_info known;
      std::uint64_t later_field;
    } newer{};
    newer.known.struct_size = sizeof newer;
    newer.later_field = 0x5eed;
    REQUIRE(pthload_records_info(records.get(), 0, &newer.known) == PTHLOAD_OK);
    CHECK(newer.known.struct_size == PTHLOAD_RECORD_INFO_SIZE_V1);
    CHECK(std::string(newer.known.name) == kZipFixtureRecords[0].name);
    CHECK(newer.later_field == 0x5eed);
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
    pthload_record_info info{.struct_size = sizeof(pthload_record_info)};
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
