// The end of central directory record, zip64 locator and zip64 end record (APPNOTE 4.3.14-4.3.16).
#include "zip/end_records.hpp"

#include <optional>

#include <fmt/format.h>

#include "common/byte_reader.hpp"
#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "zip/signatures.hpp"

namespace pthload::zip {
namespace {

using common::ByteReader;
using common::fits;

/// The classic end record's position: like miniz (torch's reader), the signature nearest the end
/// of the file that leaves room for the 22-byte record. Its comment length is not used to pick
/// it, so pthload sees the archive torch sees even when a comment holds the signature; a comment
/// running past EOF is then refused, and bytes after it are tolerated (miniz and Python's
/// zipfile accept both).
std::uint64_t find_end_record(std::span<const std::byte> file) {
  const std::uint64_t size = file.size();
  const std::uint64_t lowest =
      size > kEndRecordSize + kMaxCommentSize ? size - (kEndRecordSize + kMaxCommentSize) : 0;
  std::optional<std::uint64_t> cut_short;
  // Counts down from size - 3 so that the loop ends without wrapping below zero.
  for (std::uint64_t p_plus_one = size >= 4 ? size - 3 : 0; p_plus_one > lowest; --p_plus_one) {
    const std::uint64_t p = p_plus_one - 1;
    if (!has_signature(file, p, kEndRecordSignature)) continue;
    if (!fits(p, kEndRecordSize, size)) {
      if (!cut_short) cut_short = p;
      continue;
    }
    const std::uint64_t end =
        p + kEndRecordSize + common::load_le<std::uint16_t>(file.data() + p + 20);
    if (end > size) {
      throw FormatError(Errc::kZipEndRecordTruncated,
                        fmt::format("end record's {}-byte comment runs past end of file",
                                    end - p - kEndRecordSize),
                        {.offset = p});
    }
    return p;
  }
  if (cut_short) {
    throw FormatError(Errc::kZipEndRecordTruncated, "end of central directory record is cut short",
                      {.offset = *cut_short});
  }
  // A file that does not even start like a zip is more likely something else entirely (a legacy
  // checkpoint, a pickle) than a damaged archive; say so.
  const bool starts_like_zip =
      has_signature(file, 0, kLocalHeaderSignature) || has_signature(file, 0, kEndRecordSignature);
  if (!starts_like_zip) {
    throw FormatError(Errc::kZipNotAnArchive, "not a zip archive", {.offset = 0});
  }
  throw FormatError(Errc::kZipEndRecordNotFound,
                    fmt::format("no end of central directory record in the last {} bytes "
                                "(truncated file?)",
                                size - lowest),
                    {.offset = lowest});
}

/// On a single disk the two counts are one number written twice; a difference is an
/// inconsistency, not a second disk.
void check_entries_on_disk(std::uint64_t entries_on_disk, std::uint64_t entry_count,
                           std::uint64_t offset) {
  if (entries_on_disk != entry_count) {
    throw FormatError(Errc::kZipEntryCountMismatch,
                      fmt::format("end record says {} entries on this disk but {} in total",
                                  entries_on_disk, entry_count),
                      {.offset = offset});
  }
}

struct Zip64Values {
  std::uint64_t offset = 0;
  std::uint64_t end = 0;
  std::uint64_t entry_count = 0;
  std::uint64_t central_directory_size = 0;
  std::uint64_t central_directory_offset = 0;
};

Zip64Values read_zip64(std::span<const std::byte> file, std::uint64_t locator_offset) {
  ByteReader locator(file.subspan(locator_offset, kZip64LocatorSize), Errc::kZip64LocatorInvalid,
                     locator_offset);
  locator.skip(4, "zip64 locator signature");
  const auto disk_with_record = locator.le<std::uint32_t>("zip64 locator disk");
  const auto record_offset = locator.le<std::uint64_t>("zip64 end record offset");
  const auto total_disks = locator.le<std::uint32_t>("zip64 locator disk count");
  // Some writers put 0 in the disk count; both 0 and 1 mean a single-file archive.
  if (disk_with_record != 0 || total_disks > 1) {
    throw UnsupportedError(Errc::kZipMultiDiskUnsupported,
                           fmt::format("multi-disk archive (zip64 locator: disk {}, {} disks)",
                                       disk_with_record, total_disks),
                           {.offset = locator_offset});
  }
  if (record_offset > locator_offset || locator_offset - record_offset < kZip64EndRecordMinSize) {
    throw FormatError(Errc::kZip64LocatorInvalid,
                      fmt::format("zip64 end record offset {:#x} leaves no room before the "
                                  "locator at {:#x}",
                                  record_offset, locator_offset),
                      {.offset = locator_offset + 8});
  }
  if (!has_signature(file, record_offset, kZip64EndRecordSignature)) {
    throw FormatError(Errc::kZip64EndRecordInvalid, "zip64 end record signature missing",
                      {.offset = record_offset});
  }
  ByteReader record(file.subspan(record_offset, locator_offset - record_offset),
                    Errc::kZip64EndRecordInvalid, record_offset);
  record.skip(4, "zip64 end record signature");
  const auto record_size = record.le<std::uint64_t>("zip64 end record size");
  // The size excludes the leading 12 bytes; the record (with any extensible data) must end
  // before the locator that points at it.
  if (record_size < kZip64EndRecordMinSize - 12 || record_size > record.remaining()) {
    throw FormatError(Errc::kZip64EndRecordInvalid,
                      fmt::format("zip64 end record size {} does not fit between its start and "
                                  "the locator",
                                  record_size),
                      {.offset = record_offset + 4});
  }
  record.skip(4, "zip64 versions");
  const auto disk_number = record.le<std::uint32_t>("zip64 disk number");
  const auto disk_with_cd = record.le<std::uint32_t>("zip64 central directory disk");
  const auto entries_on_disk = record.le<std::uint64_t>("zip64 entries on this disk");
  Zip64Values values;
  values.offset = record_offset;
  values.end = record_offset + 12 + record_size;
  values.entry_count = record.le<std::uint64_t>("zip64 entry count");
  values.central_directory_size = record.le<std::uint64_t>("zip64 central directory size");
  values.central_directory_offset = record.le<std::uint64_t>("zip64 central directory offset");
  if (disk_number != 0 || disk_with_cd != 0) {
    throw UnsupportedError(Errc::kZipMultiDiskUnsupported,
                           fmt::format("multi-disk archive (zip64 end record: disk {}, central "
                                       "directory on disk {})",
                                       disk_number, disk_with_cd),
                           {.offset = record_offset + 16});
  }
  check_entries_on_disk(entries_on_disk, values.entry_count, record_offset + 24);
  return values;
}

/// A classic field takes the zip64 value when saturated; otherwise both must agree, so that two
/// readers preferring different records cannot see two different archives.
std::uint64_t merge(std::uint64_t classic, std::uint64_t saturated, std::uint64_t zip64,
                    const char* what, std::uint64_t zip64_offset) {
  if (classic == saturated) return zip64;
  if (classic != zip64) {
    throw FormatError(
        Errc::kZip64EndRecordInvalid,
        fmt::format("zip64 end record says {} is {}, the end record says {}", what, zip64, classic),
        {.offset = zip64_offset});
  }
  return classic;
}

// Where the zip64 locator lies: right before the end record, when its signature is there.
std::optional<std::uint64_t> locator_before(std::span<const std::byte> file,
                                            std::uint64_t end_record) noexcept {
  if (end_record < kZip64LocatorSize ||
      !has_signature(file, end_record - kZip64LocatorSize, kZip64LocatorSignature)) {
    return std::nullopt;
  }
  return end_record - kZip64LocatorSize;
}

}  // namespace

std::optional<std::uint64_t> zip64_end_record_start(std::span<const std::byte> file) noexcept {
  try {
    const auto locator = locator_before(file, find_end_record(file));
    if (!locator) return std::nullopt;
    // The record offset follows the signature and the disk number.
    return common::load_le<std::uint64_t>(file.data() + *locator + 8);
  } catch (const Error&) {
    return std::nullopt;
  }
}

EndRecords read_end_records(std::span<const std::byte> file) {
  EndRecords out;
  out.end_record_offset = find_end_record(file);
  ByteReader eocd(file.subspan(out.end_record_offset), Errc::kZipEndRecordTruncated,
                  out.end_record_offset);
  eocd.skip(4, "end record signature");
  const auto disk_number = eocd.le<std::uint16_t>("disk number");
  const auto disk_with_cd = eocd.le<std::uint16_t>("central directory disk");
  const auto entries_on_disk = eocd.le<std::uint16_t>("entries on this disk");
  const auto entry_count = eocd.le<std::uint16_t>("entry count");
  const auto cd_size = eocd.le<std::uint32_t>("central directory size");
  const auto cd_offset = eocd.le<std::uint32_t>("central directory offset");
  const auto comment_size = eocd.le<std::uint16_t>("comment length");
  out.comment = eocd.bytes(comment_size, "archive comment");
  out.end_record_end = eocd.file_offset();

  out.entry_count = entry_count;
  out.central_directory_size = cd_size;
  out.central_directory_offset = cd_offset;
  std::uint64_t cd_limit = out.end_record_offset;
  std::uint64_t values_offset = out.end_record_offset;

  // torch (miniz with MZ_ZIP_FLAG_WRITE_ZIP64) writes the locator and zip64 end record even for
  // tiny files; other writers only when a classic field overflows.
  if (const auto locator = locator_before(file, out.end_record_offset)) {
    const std::uint64_t locator_offset = *locator;
    const Zip64Values zip64 = read_zip64(file, locator_offset);
    if ((disk_number != 0 && disk_number != kSaturated16) ||
        (disk_with_cd != 0 && disk_with_cd != kSaturated16)) {
      throw UnsupportedError(Errc::kZipMultiDiskUnsupported,
                             fmt::format("multi-disk archive (disk {}, central directory on "
                                         "disk {})",
                                         disk_number, disk_with_cd),
                             {.offset = out.end_record_offset + 4});
    }
    out.zip64_locator_offset = locator_offset;
    out.zip64_end_record_offset = zip64.offset;
    out.zip64_end_record_end = zip64.end;
    out.entry_count =
        merge(entry_count, kSaturated16, zip64.entry_count, "the entry count", zip64.offset + 32);
    (void)merge(entries_on_disk, kSaturated16, zip64.entry_count, "the entries on this disk",
                zip64.offset + 24);
    out.central_directory_size = merge(cd_size, kSaturated32, zip64.central_directory_size,
                                       "the central directory size", zip64.offset + 40);
    out.central_directory_offset = merge(cd_offset, kSaturated32, zip64.central_directory_offset,
                                         "the central directory offset", zip64.offset + 48);
    cd_limit = zip64.offset;
    values_offset = zip64.offset;
  } else {
    if (disk_number != 0 || disk_with_cd != 0) {
      throw UnsupportedError(Errc::kZipMultiDiskUnsupported,
                             fmt::format("multi-disk archive (disk {}, central directory on "
                                         "disk {})",
                                         disk_number, disk_with_cd),
                             {.offset = out.end_record_offset + 4});
    }
    check_entries_on_disk(entries_on_disk, entry_count, out.end_record_offset + 8);
  }

  // Offsets are absolute: archives with prepended bytes and unadjusted offsets (some
  // self-extractors) are refused rather than guessed at.
  if (!fits(out.central_directory_offset, out.central_directory_size, cd_limit)) {
    throw FormatError(
        Errc::kZipCentralDirectoryOutOfBounds,
        fmt::format("central directory [{:#x}, +{:#x}) runs past its end records "
                    "at {:#x}",
                    out.central_directory_offset, out.central_directory_size, cd_limit),
        {.offset = values_offset});
  }
  return out;
}

}  // namespace pthload::zip
