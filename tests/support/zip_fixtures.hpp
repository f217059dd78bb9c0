// Test helper: the zip fixtures Python's zipfile wrote (tests/fixtures/make_zip_fixtures.py) and
// the records each holds: deflated.zip and stored.zip hold the same records, one deflated, one
// stored (tests/fixtures/zip/MANIFEST.txt).
#pragma once

#include <cstdint>
#include <string>

namespace pthload::test {

/// tests/fixtures/zip/`name`.
inline std::string zip_fixture(const char* name) {
  return std::string(PTHLOAD_FIXTURES_DIR) + "/zip/" + name;
}

/// One record of deflated.zip and stored.zip, as make_zip_fixtures.py wrote it.
struct ZipFixtureRecord {
  const char* name;
  std::uint64_t size;
  std::uint32_t crc32;
};

/// The records of deflated.zip and stored.zip, in their central directory's order.
inline constexpr ZipFixtureRecord kZipFixtureRecords[] = {{"archive/data.pkl", 17, 0xc7c434e3},
                                                          {"archive/data/0", 256, 0x29058c73},
                                                          {"archive/data/1", 1000, 0xf02fcae2},
                                                          {"archive/empty", 0, 0x00000000},
                                                          {"archive/version", 2, 0x55679ed1}};

}  // namespace pthload::test
