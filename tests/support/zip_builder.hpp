// Test helper: writes small zip archives the way torch (miniz) and other writers do, and
// records where every header field lies so that tests can corrupt exactly one (APPNOTE 4.3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pthload::test::zip_build {

/// One record to write.
struct Record {
  std::string name;
  std::string data;
  bool deflate = false;
  std::string local_name;  ///< written in the local header instead of `name` when non-empty
};

struct Options {
  /// Write the zip64 end record and locator, as torch always does.
  bool zip64_end = true;
  /// Saturate the classic end record's fields (0xFFFF / 0xFFFFFFFF) so that only the zip64
  /// values are usable; needs zip64_end.
  bool saturate_end_record = false;
  /// Saturate each central header's sizes and offset and put them in a zip64 extra field.
  bool zip64_extra = false;
  /// torch's local headers: flag bit 3, CRC and sizes 0, a data descriptor after each payload.
  bool data_descriptor = true;
  /// The zip64 end record's extensible data (APPNOTE 4.3.14): bytes between its fixed fields
  /// and the locator.
  std::string zip64_extensible_data;
  /// Pad each payload to this alignment with an `FB` local extra field (0 = no padding).
  std::uint64_t alignment = 64;
  std::string comment;
};

/// Where each header of one record lies in the file.
struct RecordLayout {
  std::string name;
  std::uint64_t local_header = 0;
  std::uint64_t data = 0;
  std::uint64_t central_header = 0;
  std::uint64_t central_extra = 0;  ///< start of the central header's extra field
};

struct Built {
  std::vector<std::byte> bytes;
  std::vector<RecordLayout> records;
  std::uint64_t central_directory = 0;
  std::uint64_t zip64_end_record = 0;  ///< 0 when none
  std::uint64_t zip64_locator = 0;     ///< 0 when none
  std::uint64_t end_record = 0;

  /// The layout of the record `name`; throws when there is none.
  [[nodiscard]] const RecordLayout& at(std::string_view name) const {
    for (const auto& record : records)
      if (record.name == name) return record;
    throw std::out_of_range("no record " + std::string(name));
  }
};

/// Writes `records` into a new archive.
[[nodiscard]] Built build(const std::vector<Record>& records, const Options& options = {});

/// Raw deflate of `data` (libdeflate, level 6).
[[nodiscard]] std::string deflate(const std::string& data);

// Field offsets within each header (APPNOTE 4.3.7, 4.3.12, 4.3.14-4.3.16).
namespace local_field {
inline constexpr std::uint64_t kSignature = 0, kVersion = 4, kFlags = 6, kMethod = 8, kTime = 10,
                               kDate = 12, kCrc = 14, kCompressedSize = 18, kSize = 22,
                               kNameLength = 26, kExtraLength = 28, kName = 30;
}
namespace central_field {
inline constexpr std::uint64_t kSignature = 0, kVersionMadeBy = 4, kVersion = 6, kFlags = 8,
                               kMethod = 10, kTime = 12, kDate = 14, kCrc = 16,
                               kCompressedSize = 20, kSize = 24, kNameLength = 28,
                               kExtraLength = 30, kCommentLength = 32, kDisk = 34,
                               kInternalAttributes = 36, kExternalAttributes = 38,
                               kLocalHeaderOffset = 42, kName = 46;
}
namespace end_field {
inline constexpr std::uint64_t kSignature = 0, kDisk = 4, kCentralDirectoryDisk = 6,
                               kEntriesOnDisk = 8, kEntries = 10, kCentralDirectorySize = 12,
                               kCentralDirectoryOffset = 16, kCommentLength = 20;
}
namespace zip64_end_field {
inline constexpr std::uint64_t kSignature = 0, kRecordSize = 4, kVersionMadeBy = 12, kVersion = 14,
                               kDisk = 16, kCentralDirectoryDisk = 20, kEntriesOnDisk = 24,
                               kEntries = 32, kCentralDirectorySize = 40,
                               kCentralDirectoryOffset = 48;
}
namespace locator_field {
inline constexpr std::uint64_t kSignature = 0, kDisk = 4, kZip64EndRecordOffset = 8, kDisks = 16;
}

/// Little-endian reads and writes of `width` bytes (1, 2, 4 or 8) at `offset`.
[[nodiscard]] std::uint64_t peek(std::span<const std::byte> bytes, std::uint64_t offset,
                                 unsigned width);
void poke(std::span<std::byte> bytes, std::uint64_t offset, unsigned width, std::uint64_t value);
inline void poke_le16(std::span<std::byte> b, std::uint64_t o, std::uint64_t v) {
  poke(b, o, 2, v);
}
inline void poke_le32(std::span<std::byte> b, std::uint64_t o, std::uint64_t v) {
  poke(b, o, 4, v);
}
inline void poke_le64(std::span<std::byte> b, std::uint64_t o, std::uint64_t v) {
  poke(b, o, 8, v);
}

}  // namespace pthload::test::zip_build
