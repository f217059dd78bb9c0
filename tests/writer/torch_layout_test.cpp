// The files save() writes are torch.save's files: for dicts torch saved
// (tests/fixtures/writer/torch-2.15.0, tests/fixtures/make_writer_fixtures.py), loading one and
// saving it again gives the same bytes — every byte but the serialization id's 40 random
// digits and their CRC-32. That covers the pickle (opcodes, memo, batches), the record order,
// the padding and descriptors torch.load's calculate_storage_offsets relies on, and the
// directory.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "pthload/checkpoint.hpp"
#include "pthload/save.hpp"
#include "support/files.hpp"
#include "writer/saved_bytes.hpp"

namespace pthload::test {
namespace {

// Zeroes the serialization id's payload and both copies of its CRC-32 (descriptor, directory).
void mask_serialization_id(std::vector<std::byte>& bytes, const std::string& archive) {
  const std::string name = archive + "/.data/serialization_id";
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const auto local = text.find(name);
  REQUIRE(local != std::string_view::npos);
  const std::size_t header = local - 30;
  const auto le16 = [&](std::size_t at) {
    return static_cast<std::size_t>(bytes[at]) | static_cast<std::size_t>(bytes[at + 1]) << 8;
  };
  const std::size_t payload = local + name.size() + le16(header + 28);
  std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(payload), 40 + 8, std::byte{0});
  const auto central = text.find(name, local + 1);
  REQUIRE(central != std::string_view::npos);
  std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(central - 46 + 16), 4, std::byte{0});
}

TEST_SUITE("fixtures") {
  TEST_CASE("save() writes what torch.save wrote, byte for byte but the serialization id") {
    int files = 0;
    for (const auto& path : fixture_files("writer", has_extension(".pt"))) {
      CAPTURE(path);
      const Checkpoint source = load(path);
      std::vector<std::byte> expected = file_bytes(path);
      std::vector<std::byte> written = saved_bytes(source, {.archive_name = path.stem().string()});
      REQUIRE(written.size() == expected.size());
      mask_serialization_id(expected, path.stem().string());
      mask_serialization_id(written, path.stem().string());
      const auto [mismatch, _] = std::mismatch(written.begin(), written.end(), expected.begin());
      CHECK_MESSAGE(mismatch == written.end(),
                    "first difference at byte " << (mismatch - written.begin()));
      ++files;
    }
    CHECK(files >= 5);
  }
}

}  // namespace
}  // namespace pthload::test
