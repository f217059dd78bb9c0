// One record of a zip archive as the central directory describes it (APPNOTE 4.3.12, 4.5.3).
#pragma once

#include <cstdint>
#include <string_view>

namespace pthload::zip {

/// Compression methods pthload knows by number (APPNOTE 4.4.5).
inline constexpr std::uint16_t kMethodStored = 0;
inline constexpr std::uint16_t kMethodDeflated = 8;

/// General purpose flag bits that change how a record's bytes must be read (APPNOTE 4.4.4).
inline constexpr std::uint16_t kFlagEncrypted = 1u << 0;
inline constexpr std::uint16_t kFlagDataDescriptor = 1u << 3;
inline constexpr std::uint16_t kFlagStrongEncryption = 1u << 6;

/// A record of the archive. Sizes, CRC and offsets come from the central directory (resolved
/// through its zip64 extra field); only `data_offset` depends on the local header, because
/// torch pads payloads to 64 bytes with a local-only extra field.
struct Entry {
  /// Raw bytes as stored (torch writes UTF-8, flag bit 11); never contains NUL. A view of the
  /// central directory in the bytes the archive was parsed from, which outlive every Entry (the
  /// archive borrows them too): 100 000 records then cost no allocation each.
  std::string_view name;
  std::uint16_t method = 0;  ///< 0 stored, 8 deflated; others are refused by Archive::read
  std::uint16_t flags = 0;   ///< general purpose bit flags from the central directory
  std::uint32_t crc32 = 0;   ///< from the central directory; checked only on request
  std::uint64_t compressed_size = 0;
  std::uint64_t uncompressed_size = 0;
  std::uint64_t local_header_offset = 0;
  std::uint64_t data_offset = 0;  ///< payload start: local header + 30 + local name + local extra
  std::uint64_t central_directory_offset = 0;  ///< where this entry's central header starts
};

}  // namespace pthload::zip
