// The central directory: one file header per record, the archive's index (APPNOTE 4.3.12, 4.5.3).
#include "zip/central_directory.hpp"

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "common/byte_reader.hpp"
#include "common/check.hpp"
#include "common/fresh_memory.hpp"
#include "pthload/error.hpp"
#include "zip/extra_field.hpp"
#include "zip/signatures.hpp"

namespace pthload::zip {
namespace {

using common::ByteReader;

struct RawHeader {
  std::uint64_t compressed_size;
  std::uint64_t uncompressed_size;
  std::uint64_t local_header_offset;
  std::uint32_t disk_start;
};

/// Replaces the saturated classic fields with the zip64 extra field's values. The field holds
/// only the values whose classic field is saturated, always in the order uncompressed size,
/// compressed size, local header offset, disk (APPNOTE 4.5.3); writers that add more than that
/// are tolerated, fewer is an error.
void resolve_zip64(RawHeader& header, std::span<const std::byte> extra,
                   std::uint64_t extra_offset) {
  const bool need_uncompressed = header.uncompressed_size == kSaturated32;
  const bool need_compressed = header.compressed_size == kSaturated32;
  const bool need_offset = header.local_header_offset == kSaturated32;
  const bool need_disk = header.disk_start == kSaturated16;
  if (!need_uncompressed && !need_compressed && !need_offset && !need_disk) return;
  const auto field = find_extra_field(extra, kZip64ExtraId);
  if (!field) {
    throw FormatError(Errc::kZip64ExtraFieldInvalid,
                      "saturated size or offset without a zip64 extra field",
                      {.offset = extra_offset});
  }
  const auto field_offset = extra_offset + static_cast<std::uint64_t>(field->data() - extra.data());
  ByteReader reader(*field, Errc::kZip64ExtraFieldInvalid, field_offset);
  if (need_uncompressed) header.uncompressed_size = reader.le<std::uint64_t>("zip64 size");
  if (need_compressed) header.compressed_size = reader.le<std::uint64_t>("zip64 compressed size");
  if (need_offset) header.local_header_offset = reader.le<std::uint64_t>("zip64 header offset");
  if (need_disk) header.disk_start = reader.le<std::uint32_t>("zip64 disk number");
}

Entry read_entry(ByteReader& reader, std::size_t index) {
  Entry entry;
  entry.central_directory_offset = reader.file_offset();
  if (reader.le<std::uint32_t>("central header signature") != kCentralHeaderSignature) {
    throw FormatError(Errc::kZipCentralDirectoryEntryInvalid,
                      fmt::format("central directory entry {} has no PK\\1\\2 signature", index),
                      {.offset = entry.central_directory_offset});
  }
  reader.skip(4, "versions");
  entry.flags = reader.le<std::uint16_t>("flags");
  entry.method = reader.le<std::uint16_t>("method");
  reader.skip(4, "modification time");
  entry.crc32 = reader.le<std::uint32_t>("crc-32");
  RawHeader raw{};
  raw.compressed_size = reader.le<std::uint32_t>("compressed size");
  raw.uncompressed_size = reader.le<std::uint32_t>("uncompressed size");
  const auto name_size = reader.le<std::uint16_t>("name length");
  const auto extra_size = reader.le<std::uint16_t>("extra length");
  const auto comment_size = reader.le<std::uint16_t>("comment length");
  raw.disk_start = reader.le<std::uint16_t>("disk number");
  reader.skip(6, "attributes");
  raw.local_header_offset = reader.le<std::uint32_t>("local header offset");
  const auto name = reader.bytes(name_size, "name");
  entry.name = {reinterpret_cast<const char*>(name.data()), name.size()};
  common::with_context({.record = entry.name}, [&] {
    const std::uint64_t extra_offset = reader.file_offset();
    const auto extra = reader.bytes(extra_size, "extra field");
    reader.skip(comment_size, "file comment");
    // A NUL would make the name mean one thing to C callers (and pthinspect output) and another
    // to this index, which is how duplicate-name checks get bypassed; torch never writes one.
    if (std::memchr(entry.name.data(), '\0', entry.name.size()) != nullptr) {
      throw FormatError(Errc::kZipCentralDirectoryEntryInvalid, "name contains a NUL byte",
                        {.offset = entry.central_directory_offset + kCentralHeaderSize});
    }
    resolve_zip64(raw, extra, extra_offset);
    if (raw.disk_start != 0) {
      throw UnsupportedError(
          Errc::kZipMultiDiskUnsupported,
          fmt::format("multi-disk archive (record starts on disk {})", raw.disk_start),
          {.offset = entry.central_directory_offset + 34});
    }
  });
  entry.compressed_size = raw.compressed_size;
  entry.uncompressed_size = raw.uncompressed_size;
  entry.local_header_offset = raw.local_header_offset;
  return entry;
}

// Reads the header at `position` of `directory` (at file offset `directory_offset`) into
// `entries` and returns its size, when it is as torch writes it: whole, signed, with no
// saturated field (so no zip64 extra field to consult), on disk 0 and named without NUL. Returns
// 0 for anything else, which read_entry then reads and reports as it always has: the fields are
// read at fixed offsets here, without a bounds check and error context per field, because a
// 100 000-record directory spent most of its parse on those.
std::size_t read_plain_entry(std::span<const std::byte> directory, std::size_t position,
                             std::uint64_t directory_offset, EntryList& entries) {
  using common::load_le;
  if (directory.size() - position < kCentralHeaderSize) return 0;
  const std::byte* header = directory.data() + position;
  const std::size_t name_size = load_le<std::uint16_t>(header + 28);
  const std::size_t size = kCentralHeaderSize + name_size + load_le<std::uint16_t>(header + 30) +
                           load_le<std::uint16_t>(header + 32);
  if (load_le<std::uint32_t>(header) != kCentralHeaderSignature ||
      size > directory.size() - position) {
    return 0;
  }
  const auto compressed_size = load_le<std::uint32_t>(header + 20);
  const auto uncompressed_size = load_le<std::uint32_t>(header + 24);
  const auto local_header_offset = load_le<std::uint32_t>(header + 42);
  if (compressed_size == kSaturated32 || uncompressed_size == kSaturated32 ||
      local_header_offset == kSaturated32 || load_le<std::uint16_t>(header + 34) != 0) {
    return 0;
  }
  const auto* name = reinterpret_cast<const char*>(header + kCentralHeaderSize);
  if (std::memchr(name, '\0', name_size) != nullptr) return 0;
  entries.push_back({.name = {name, name_size},
                     .method = load_le<std::uint16_t>(header + 10),
                     .flags = load_le<std::uint16_t>(header + 8),
                     .crc32 = load_le<std::uint32_t>(header + 16),
                     .compressed_size = compressed_size,
                     .uncompressed_size = uncompressed_size,
                     .local_header_offset = local_header_offset,
                     .central_directory_offset = directory_offset + position});
  return size;
}

}  // namespace

CentralDirectory read_central_directory(std::span<const std::byte> file, const EndRecords& end,
                                        const Limits& limits) {
  const std::uint64_t count_offset = end.zip64_end_record_offset.value_or(end.end_record_offset);
  if (end.entry_count > limits.max_zip_entries) {
    throw FormatError(Errc::kZipLimitExceeded,
                      fmt::format("archive declares {} entries, more than the limit of {}",
                                  end.entry_count, limits.max_zip_entries),
                      {.offset = count_offset});
  }
  // Each header takes at least 46 bytes, so a count the directory cannot hold is refused before
  // any memory is reserved for it.
  if (end.entry_count > end.central_directory_size / kCentralHeaderSize) {
    throw FormatError(Errc::kZipEntryCountMismatch,
                      fmt::format("end record declares {} entries; a central directory of {} "
                                  "bytes holds at most {}",
                                  end.entry_count, end.central_directory_size,
                                  end.central_directory_size / kCentralHeaderSize),
                      {.offset = count_offset});
  }
  const auto directory = file.subspan(end.central_directory_offset, end.central_directory_size);
  CentralDirectory result{.end = end};
  EntryList& entries = result.entries;
  entries.reserve(end.entry_count);
  // Names are indexed a few dozen at a time as they are read, while their bytes are in the
  // cache.
  constexpr std::size_t kIndexEvery = 64;
  result.names = NameIndex(end.entry_count);
  std::size_t position = 0;
  for (std::uint64_t i = 0; i < end.entry_count; ++i) {
    if (position == directory.size()) {
      throw FormatError(Errc::kZipEntryCountMismatch,
                        fmt::format("end record declares {} entries; the central directory "
                                    "holds {}",
                                    end.entry_count, i),
                        {.offset = end.central_directory_offset + position});
    }
    const std::size_t size =
        read_plain_entry(directory, position, end.central_directory_offset, entries);
    if (size != 0) {
      position += size;
    } else {
      ByteReader reader(directory, Errc::kZipCentralDirectoryEntryInvalid,
                        end.central_directory_offset);
      reader.seek(position, "central header");
      entries.push_back(read_entry(reader, i));
      position = reader.position();
    }
    if (entries.size() % kIndexEvery == 0) result.names.add(entries);
  }
  if (position != directory.size()) {
    throw FormatError(Errc::kZipEntryCountMismatch,
                      fmt::format("{} bytes follow the {} entries the end record declares",
                                  directory.size() - position, end.entry_count),
                      {.offset = end.central_directory_offset + position});
  }
  result.names.add(entries);
  result.names.finish(entries);
  return result;
}

}  // namespace pthload::zip
