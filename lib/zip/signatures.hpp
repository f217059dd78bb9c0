// The fixed sizes and signatures of zip headers (APPNOTE 4.3.7, 4.3.12, 4.3.14-4.3.16).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/byte_reader.hpp"

namespace pthload::zip {

inline constexpr std::uint32_t kLocalHeaderSignature = 0x04034b50;     // PK\3\4
inline constexpr std::uint32_t kCentralHeaderSignature = 0x02014b50;   // PK\1\2
inline constexpr std::uint32_t kEndRecordSignature = 0x06054b50;       // PK\5\6
inline constexpr std::uint32_t kZip64EndRecordSignature = 0x06064b50;  // PK\6\6
inline constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;    // PK\6\7

inline constexpr std::uint64_t kLocalHeaderSize = 30;
inline constexpr std::uint64_t kCentralHeaderSize = 46;
inline constexpr std::uint64_t kEndRecordSize = 22;
inline constexpr std::uint64_t kMaxCommentSize = 0xFFFF;
inline constexpr std::uint64_t kZip64LocatorSize = 20;
inline constexpr std::uint64_t kZip64EndRecordMinSize = 56;

/// Zip64 extra field header id (APPNOTE 4.5.3).
inline constexpr std::uint16_t kZip64ExtraId = 0x0001;

/// Classic fields saturated to these values mean "see the zip64 record" (APPNOTE 4.4.1.4).
inline constexpr std::uint16_t kSaturated16 = 0xFFFF;
inline constexpr std::uint32_t kSaturated32 = 0xFFFF'FFFF;

/// Whether the four bytes at `offset` of `file` are `signature`; false when they do not fit.
[[nodiscard]] inline bool has_signature(std::span<const std::byte> file, std::uint64_t offset,
                                        std::uint32_t signature) noexcept {
  return common::fits(offset, 4, file.size()) &&
         common::load_le<std::uint32_t>(file.data() + offset) == signature;
}

}  // namespace pthload::zip
