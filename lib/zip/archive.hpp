// A zip archive over borrowed bytes: index, lookup and record contents (APPNOTE 4.3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "common/aligned_buffer.hpp"
#include "common/fresh_memory.hpp"
#include "common/mapped_file.hpp"
#include "pthload/limits.hpp"
#include "zip/central_directory.hpp"
#include "zip/end_records.hpp"
#include "zip/entry.hpp"
#include "zip/name_index.hpp"

namespace pthload::zip {

/// A record's contents: a stored record is a view into the archive's bytes (valid while the
/// archive's file is), a deflated one an owned, 64-byte aligned buffer.
class RecordBytes {
 public:
  explicit RecordBytes(std::span<const std::byte> view) noexcept : storage_(view) {}
  explicit RecordBytes(common::AlignedBuffer owned) noexcept : storage_(std::move(owned)) {}

  /// The contents. A view's bytes live as long as the archive's file; owned bytes as long as
  /// this object (moving it keeps them valid).
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept;
  /// True when bytes() is a zero-copy view into the archive's file.
  [[nodiscard]] bool is_view() const noexcept {
    return std::holds_alternative<std::span<const std::byte>>(storage_);
  }
  /// The contents as an owned aligned buffer: the inflated buffer itself, or a copy of a view.
  /// Throws std::bad_alloc.
  [[nodiscard]] common::AlignedBuffer take_buffer() &&;

 private:
  std::variant<std::span<const std::byte>, common::AlignedBuffer> storage_;
};

/// The index of a zip archive: its end records, central directory and local headers, all
/// validated by parse(). Copyable; holds no pointer into itself.
class Archive {
 public:
  /// Parses the end records (zip64 included), the central directory and every local header of
  /// `file`, and checks that no two records overlap and no name repeats. `file` is borrowed:
  /// it must outlive the Archive and every RecordBytes view read from it. Record contents
  /// (method, encryption, inflation, CRC) are checked only by read(). Throws FormatError or
  /// UnsupportedError (kZipMultiDiskUnsupported) with the record name and file offset.
  [[nodiscard]] static Archive parse(std::span<const std::byte> file, const Limits& limits = {});
  /// As above over `file`'s bytes, which stay borrowed; and the bytes read() inflates or
  /// checks are read from the file with pread (MappedFile::copy_out) rather than walked in a
  /// mapping or image: a file truncated under a CRC check or an inflation gives IoError, never
  /// SIGBUS, and an io=read image's unread records are read, not taken for zeros. Stored
  /// records read() returns are still views of `file.bytes()`.
  [[nodiscard]] static Archive parse(const common::MappedFile& file, const Limits& limits = {});
  /// As above, taking the end records and central directory fill_archive_image already read
  /// from `file` (which must be the image it filled) instead of parsing them again.
  [[nodiscard]] static Archive parse(const common::MappedFile& file, const Limits& limits,
                                     CentralDirectory read_already);

  /// Every entry, in central-directory order. Valid while the Archive is.
  [[nodiscard]] const EntryList& entries() const noexcept { return entries_; }
  /// The entry named exactly `name` (raw bytes), or nullptr. O(1) expected (a hash table; a
  /// file crafted to defeat it, O(log n)). Valid while the Archive is.
  [[nodiscard]] const Entry* find(std::string_view name) const noexcept;
  /// The entry named `name`; throws FormatError kZipRecordNotFound when absent.
  [[nodiscard]] const Entry& at(std::string_view name) const;

  /// The contents of `entry` (one of entries()): a view for stored records, a buffer inflated
  /// once for deflated ones. With `verify_crc`, also checks the CRC-32 (torch never does).
  /// Throws UnsupportedError (kZipEncrypted, kZipUnsupportedMethod naming the method),
  /// FormatError (kZipRecordOutOfBounds, kZipCentralDirectoryEntryInvalid for a stored record
  /// whose two sizes differ, inflate errors, kZipLimitExceeded, kZipCrcMismatch), bad_alloc.
  [[nodiscard]] RecordBytes read(const Entry& entry, bool verify_crc = false) const;
  /// Checks `entry`'s CRC-32 against its contents (inflating a deflated record); throws what
  /// read() throws, kZipCrcMismatch when they differ.
  void verify_crc(const Entry& entry) const;
  /// Throws FormatError kZipCrcMismatch when `contents` (entry's, already read) do not have
  /// the CRC-32 the central directory gives.
  static void check_crc(const Entry& entry, std::span<const std::byte> contents);

  /// The file offset of the classic end of central directory record.
  [[nodiscard]] std::uint64_t end_of_central_directory_offset() const noexcept {
    return end_.end_record_offset;
  }
  [[nodiscard]] std::uint64_t central_directory_offset() const noexcept {
    return end_.central_directory_offset;
  }
  [[nodiscard]] std::uint64_t central_directory_size() const noexcept {
    return end_.central_directory_size;
  }
  /// Whether the archive has zip64 end records (torch always writes them).
  [[nodiscard]] bool is_zip64() const noexcept { return end_.zip64_end_record_offset.has_value(); }
  /// The archive comment's raw bytes (empty when none), a view into the file.
  [[nodiscard]] std::string_view comment() const noexcept {
    return {reinterpret_cast<const char*>(end_.comment.data()), end_.comment.size()};
  }
  /// The bytes the archive was parsed from.
  [[nodiscard]] std::span<const std::byte> file() const noexcept { return file_; }

 private:
  Archive(std::span<const std::byte> file, const Limits& limits) : file_(file), limits_(limits) {}
  /// The rest of parse() once the central directory is read: the duplicate names, local
  /// headers, layout checks.
  [[nodiscard]] static Archive index(std::span<const std::byte> file, const Limits& limits,
                                     CentralDirectory directory);

  /// The CRC-32 of `payload` (bytes of file_), read a chunk at a time through source_ where
  /// there is one.
  [[nodiscard]] std::uint32_t crc_of(std::span<const std::byte> payload,
                                     std::string_view record) const;

  std::span<const std::byte> file_;
  /// The file file_ belongs to, when parsed from one: payloads are read from it with pread.
  const common::MappedFile* source_ = nullptr;
  Limits limits_;
  EndRecords end_;
  EntryList entries_;
  NameIndex names_;  ///< of entries_
};

}  // namespace pthload::zip
