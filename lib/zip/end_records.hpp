// The end of central directory record, zip64 locator and zip64 end record (APPNOTE 4.3.14-4.3.16).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace pthload::zip {

/// What the end records say about the central directory, with zip64 values substituted where
/// the classic fields are saturated. Offsets are file offsets.
struct EndRecords {
  std::uint64_t end_record_offset = 0;  ///< the classic end of central directory record
  std::uint64_t end_record_end = 0;     ///< one past its comment
  std::span<const std::byte> comment;   ///< the archive comment, a view into the file
  std::optional<std::uint64_t> zip64_locator_offset;
  std::optional<std::uint64_t> zip64_end_record_offset;
  std::uint64_t zip64_end_record_end = 0;  ///< one past the zip64 end record, when present
  std::uint64_t entry_count = 0;
  std::uint64_t central_directory_offset = 0;
  std::uint64_t central_directory_size = 0;
};

/// Finds and validates the end records of `file`. Throws FormatError (kZipNotAnArchive,
/// kZipEndRecordNotFound, kZipEndRecordTruncated, kZip64LocatorInvalid, kZip64EndRecordInvalid,
/// kZipCentralDirectoryOutOfBounds) or UnsupportedError (kZipMultiDiskUnsupported).
[[nodiscard]] EndRecords read_end_records(std::span<const std::byte> file);

/// Where the zip64 end record starts, as the locator just before the end record says; nullopt
/// when there is no end record or no locator. Reads only the end record, its comment and the
/// 20 bytes before it: a reader of the file's tail must read that record too, which
/// extensible data may put anywhere before the locator. Never throws.
[[nodiscard]] std::optional<std::uint64_t> zip64_end_record_start(
    std::span<const std::byte> file) noexcept;

}  // namespace pthload::zip
