// fuzz_zip: the zip layer over arbitrary bytes (APPNOTE 4.3). Properties: any input parses into
// an archive or throws pthload::Error, without reading outside the input or allocating past the
// limits; every record it lists is found by name, reads to its stated size, and the CRC path
// (read with verify_crc, and verify_crc) accepts it exactly when a bitwise reference CRC-32 of
// the bytes read equals the central directory's, so the checked and unchecked reads agree.
#include <cstddef>
#include <cstdint>
#include <span>

#include "pthload/error.hpp"
#include "pthload/limits.hpp"
#include "zip/archive.hpp"

namespace {

// APPNOTE 4.4.7's CRC-32 one bit at a time: slow and obviously right, unlike the library's.
std::uint32_t reference_crc32(std::span<const std::byte> bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const std::byte b : bytes) {
    crc ^= std::to_integer<std::uint32_t>(b);
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

bool reads_with_crc_check(const pthload::zip::Archive& archive, const pthload::zip::Entry& entry) {
  try {
    (void)archive.read(entry, /*verify_crc=*/true);
  } catch (const pthload::Error&) {
    return false;
  }
  try {
    archive.verify_crc(entry);
  } catch (const pthload::Error&) {
    __builtin_trap();  // the two CRC paths disagree
  }
  return true;
}

pthload::Limits fuzz_limits() {
  pthload::Limits limits;
  limits.max_zip_entries = 100'000;
  limits.max_inflated_record_bytes = 16u << 20;
  return limits;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto archive = pthload::zip::Archive::parse(bytes, fuzz_limits());
    for (const auto& entry : archive.entries()) {
      if (archive.find(entry.name) != &entry) __builtin_trap();  // the index must be exact
      try {
        const auto record = archive.read(entry);
        if (record.bytes().size() != entry.uncompressed_size) __builtin_trap();
        const bool crc_matches = reference_crc32(record.bytes()) == entry.crc32;
        if (reads_with_crc_check(archive, entry) != crc_matches) __builtin_trap();
      } catch (const pthload::Error&) {
        // One bad record must not hide the others.
      }
    }
  } catch (const pthload::Error&) {
  }
  return 0;
}
