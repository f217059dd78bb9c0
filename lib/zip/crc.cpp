// CRC-32 of record contents, as stored in zip headers (APPNOTE 4.4.7).
#include "zip/crc.hpp"

#include <libdeflate.h>

namespace pthload::zip {

std::uint32_t crc32_of(std::span<const std::byte> bytes) noexcept {
  return libdeflate_crc32(0, bytes.data(), bytes.size());
}

std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::byte> bytes) noexcept {
  return libdeflate_crc32(crc, bytes.data(), bytes.size());
}

}  // namespace pthload::zip
