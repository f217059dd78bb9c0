// CRC-32 of record contents, as stored in zip headers (APPNOTE 4.4.7).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace pthload::zip {

/// The zip CRC-32 (polynomial 0xEDB88320) of `bytes`.
[[nodiscard]] std::uint32_t crc32_of(std::span<const std::byte> bytes) noexcept;
/// The CRC-32 of the bytes hashed so far (`crc`, 0 at the start) followed by `bytes`: a record
/// checked a chunk at a time.
[[nodiscard]] std::uint32_t crc32_update(std::uint32_t crc,
                                         std::span<const std::byte> bytes) noexcept;

}  // namespace pthload::zip
