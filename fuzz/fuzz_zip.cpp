// fuzz_zip: the zip layer over arbitrary bytes (APPNOTE 4.3). Property: any input parses into
// an archive whose every record reads (with and without CRC checks), or throws pthload::Error,
// without reading outside the input or allocating past the limits.
#include <cstddef>
#include <cstdint>
#include <span>

#include "pthload/error.hpp"
#include "pthload/options.hpp"
#include "zip/archive.hpp"

namespace {
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
        archive.verify_crc(entry);
      } catch (const pthload::Error&) {
        // One bad record must not hide the others.
      }
    }
  } catch (const pthload::Error&) {
  }
  return 0;
}
