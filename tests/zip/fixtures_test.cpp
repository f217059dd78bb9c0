// Real archives from Python's zipfile and torch.save (tests/fixtures/make_zip_fixtures.py)
// against the record lists Python read from them (tests/fixtures/zip/MANIFEST.txt).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/mapped_file.hpp"
#include "zip/archive.hpp"
#include "zip/crc.hpp"

using pthload::common::MappedFile;
using pthload::zip::Archive;

namespace {

const std::filesystem::path kFixtures = PTHLOAD_FIXTURES_DIR;

struct ExpectedRecord {
  std::string name;
  std::uint64_t size = 0;
  std::uint64_t compressed_size = 0;
  std::uint16_t method = 0;
  std::uint32_t crc32 = 0;
};

struct ExpectedFile {
  std::string path;
  std::string comment;
  std::vector<ExpectedRecord> records;
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream stream(line);
  std::string field;
  while (std::getline(stream, field, '\t'))
    fields.push_back(field);
  return fields;
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<ExpectedFile> read_manifest() {
  std::ifstream in(kFixtures / "zip" / "MANIFEST.txt");
  REQUIRE(in.good());
  std::vector<ExpectedFile> files;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto fields = split_tabs(line);
    if (fields[0] == "file") {
      files.push_back({.path = fields.at(1)});
    } else if (fields[0] == "comment") {
      files.back().comment = unhex(fields.at(1));
    } else if (fields[0] == "record") {
      REQUIRE(fields.size() == 6);
      files.back().records.push_back(
          {fields[1], std::stoull(fields[2]), std::stoull(fields[3]),
           static_cast<std::uint16_t>(std::stoul(fields[4])),
           static_cast<std::uint32_t>(std::stoul(fields[5], nullptr, 16))});
    } else {
      FAIL("unknown manifest line: " << line);
    }
  }
  return files;
}

bool is_torch_save(const std::string& path) {
  return path.ends_with(".pt");
}

}  // namespace

TEST_SUITE_BEGIN("fixtures");

TEST_CASE("zip: every fixture archive lists and reads the records Python's zipfile found") {
  const auto files = read_manifest();
  CHECK(files.size() >= 10);
  for (const auto& expected : files) {
    CAPTURE(expected.path);
    const auto file = MappedFile::open(kFixtures / expected.path);
    const auto archive = Archive::parse(file.bytes());
    CHECK(archive.comment() == expected.comment);
    REQUIRE(archive.entries().size() == expected.records.size());
    for (std::size_t i = 0; i < expected.records.size(); ++i) {
      const auto& want = expected.records[i];
      const auto& entry = archive.entries()[i];
      CAPTURE(want.name);
      CHECK(entry.name == want.name);
      CHECK(entry.uncompressed_size == want.size);
      CHECK(entry.compressed_size == want.compressed_size);
      CHECK(entry.method == want.method);
      CHECK(entry.crc32 == want.crc32);
      CHECK(archive.find(want.name) == &entry);
      const auto record = archive.read(entry, true);
      CHECK(record.bytes().size() == want.size);
      CHECK(pthload::zip::crc32_of(record.bytes()) == want.crc32);
      CHECK(record.is_view() == (want.method == 0));
      // torch.save pads every payload to 64 bytes and writes sizes only in the central
      // directory; re-zipped copies (deflated) do neither.
      if (is_torch_save(expected.path) && want.method == 0) {
        CHECK(entry.data_offset % 64 == 0);
        CHECK(entry.flags == 0x0808);
        CHECK(archive.is_zip64());
      }
    }
  }
}

TEST_CASE("zip: torch.save names the top folder after the file, or 'archive' for a buffer") {
  const auto to_path = MappedFile::open(kFixtures / "zip" / "tiny_state_dict.pt");
  const auto from_path = Archive::parse(to_path.bytes());
  CHECK(from_path.entries().front().name == "tiny_state_dict/data.pkl");
  CHECK(from_path.find("tiny_state_dict/version") != nullptr);
  const auto to_buffer = MappedFile::open(kFixtures / "zip" / "bytesio.pt");
  const auto from_buffer = Archive::parse(to_buffer.bytes());
  CHECK(from_buffer.entries().front().name == "archive/data.pkl");
  const auto version = from_buffer.read(from_buffer.at("archive/version"));
  CHECK(std::string(reinterpret_cast<const char*>(version.bytes().data()),
                    version.bytes().size()) == "3\n");
}

TEST_CASE("zip: sample.pt is a torch.save'd state_dict") {
  const auto file = MappedFile::open(kFixtures / "sample.pt");
  const auto archive = Archive::parse(file.bytes());
  CHECK(archive.is_zip64());
  CHECK(archive.find("sample/data.pkl") != nullptr);
  CHECK(archive.find("sample/data/0") != nullptr);
}

TEST_CASE("zip: zip64 extra fields written by Python hold only the saturated values") {
  const auto file = MappedFile::open(kFixtures / "zip" / "zip64_extra.zip");
  const auto archive = Archive::parse(file.bytes());
  CHECK(archive.is_zip64());
  // z/empty saturates only its local header offset; z/abc nothing at all.
  CHECK(archive.at("z/abc").local_header_offset == 0);
  CHECK(archive.at("z/empty").local_header_offset > 0);
  for (const auto& entry : archive.entries())
    archive.verify_crc(entry);
}

TEST_SUITE_END();
