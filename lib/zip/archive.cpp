// A zip archive over borrowed bytes: index, lookup and record contents (APPNOTE 4.3).
#include "zip/archive.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/assert.hpp"
#include "common/check.hpp"
#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "zip/central_directory.hpp"
#include "zip/crc.hpp"
#include "zip/inflate.hpp"
#include "zip/layout.hpp"
#include "zip/local_header.hpp"
#include "zip/methods.hpp"

namespace pthload::zip {
namespace {

// Where the compression method lies in a central-directory header (APPNOTE 4.3.12: signature,
// version made by, version needed and flags come first): an unknown method is reported there.
constexpr std::uint64_t kCentralHeaderMethodOffset = 10;

// The entry a duplicate-name error names where names repeat: of the names that do, the first in
// the order of (std::hash of the name, the name), and its second entry. That is the pair the
// index sorted by std::hash before NameIndex found first, and errors stay as they were; finding
// it costs a pass over the entries, on the error path only.
const Entry& reported_repeat(const EntryList& entries, const NameIndex& names) {
  const Entry* chosen = nullptr;
  std::size_t chosen_hash = 0;
  for (const Entry& entry : entries) {
    // The index finds a name's first entry: any other is a repeat, and met in list order, the
    // first repeat of a name is its second entry.
    if (names.find(entries, entry.name) == &entry) continue;
    const std::size_t hash = std::hash<std::string_view>{}(entry.name);
    if (chosen == nullptr || hash < chosen_hash ||
        (hash == chosen_hash && entry.name < chosen->name)) {
      chosen = &entry;
      chosen_hash = hash;
    }
  }
  PTHLOAD_ASSERT(chosen != nullptr);
  return *chosen;
}

[[noreturn]] void throw_crc_mismatch(const Entry& entry, std::uint32_t actual) {
  throw FormatError(
      Errc::kZipCrcMismatch,
      fmt::format("CRC-32 is {:#010x}, the central directory says {:#010x}", actual, entry.crc32),
      {.record = std::string(entry.name), .offset = entry.data_offset});
}

}  // namespace

std::span<const std::byte> RecordBytes::bytes() const noexcept {
  if (const auto* view = std::get_if<std::span<const std::byte>>(&storage_)) return *view;
  return std::get<common::AlignedBuffer>(storage_).span();
}

common::AlignedBuffer RecordBytes::take_buffer() && {
  if (auto* owned = std::get_if<common::AlignedBuffer>(&storage_)) return std::move(*owned);
  const auto view = std::get<std::span<const std::byte>>(storage_);
  common::AlignedBuffer copy(view.size());
  if (!view.empty()) std::memcpy(copy.data(), view.data(), view.size());
  return copy;
}

Archive Archive::parse(std::span<const std::byte> file, const Limits& limits) {
  const EndRecords end = read_end_records(file);
  return index(file, limits, read_central_directory(file, end, limits));
}

Archive Archive::index(std::span<const std::byte> file, const Limits& limits,
                       CentralDirectory directory) {
  Archive archive(file, limits);
  const bool local_headers_resolved = directory.local_headers_resolved;
  archive.end_ = directory.end;
  archive.entries_ = std::move(directory.entries);
  const auto& entries = archive.entries_;

  // A directory made some other way than by read_central_directory has its names indexed here.
  archive.names_ = directory.names.size() == entries.size() ? std::move(directory.names)
                                                            : NameIndex::of(entries);
  // Two records with one name would let two readers pick different ones.
  if (archive.names_.first_repeat()) {
    const Entry& later = reported_repeat(entries, archive.names_);
    throw FormatError(
        Errc::kZipDuplicateName, "name appears twice in the central directory",
        {.record = std::string(later.name), .offset = later.central_directory_offset});
  }

  if (!local_headers_resolved) {
    for (Entry& entry : archive.entries_)
      resolve_local_header(file, entry);
  }
  check_layout(archive.entries_, archive.end_);
  return archive;
}

Archive Archive::parse(const common::MappedFile& file, const Limits& limits) {
  Archive archive = parse(file.bytes(), limits);
  if (file.reader() != nullptr) archive.source_ = &file;
  return archive;
}

Archive Archive::parse(const common::MappedFile& file, const Limits& limits,
                       CentralDirectory read_already) {
  Archive archive = index(file.bytes(), limits, std::move(read_already));
  if (file.reader() != nullptr) archive.source_ = &file;
  return archive;
}

std::uint32_t Archive::crc_of(std::span<const std::byte> payload, std::string_view record) const {
  if (source_ == nullptr) return crc32_of(payload);
  // Bounded, reused: a 10 GB record is checked in as much memory as a small one.
  constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
  std::vector<std::byte> chunk(std::min(payload.size(), kChunkBytes));
  std::uint32_t crc = 0;
  for (std::size_t done = 0; done < payload.size();) {
    const std::size_t n = std::min(chunk.size(), payload.size() - done);
    source_->copy_out(payload.subspan(done, n), std::span(chunk).first(n), record);
    crc = crc32_update(crc, std::span(chunk).first(n));
    done += n;
  }
  return crc;
}

const Entry* Archive::find(std::string_view name) const noexcept {
  return names_.find(entries_, name);
}

const Entry& Archive::at(std::string_view name) const {
  if (const Entry* entry = find(name)) return *entry;
  throw FormatError(Errc::kZipRecordNotFound, "no such record in the archive",
                    {.record = std::string(name)});
}

RecordBytes Archive::read(const Entry& entry, bool verify_crc) const {
  // Made only when an error is thrown: copying the name for every read was one allocation per
  // storage on the success path.
  const auto where = [&] {
    return ErrorContext{.record = std::string(entry.name), .offset = entry.data_offset};
  };
  // parse() checked this for its own entries; a caller-made Entry must not read outside either.
  if (!common::fits(entry.data_offset, entry.compressed_size, file_.size())) {
    throw FormatError(Errc::kZipRecordOutOfBounds, "payload runs past end of file", where());
  }
  if ((entry.flags & (kFlagEncrypted | kFlagStrongEncryption)) != 0) {
    throw UnsupportedError(Errc::kZipEncrypted, "record is encrypted", where());
  }
  const auto payload = file_.subspan(entry.data_offset, entry.compressed_size);
  RecordBytes bytes(payload);
  if (entry.method == kMethodStored) {
    if (entry.compressed_size != entry.uncompressed_size) {
      throw FormatError(
          Errc::kZipCentralDirectoryEntryInvalid,
          fmt::format("stored record has compressed size {} but size {}", entry.compressed_size,
                      entry.uncompressed_size),
          {.record = std::string(entry.name), .offset = entry.central_directory_offset});
    }
  } else if (entry.method == kMethodDeflated) {
    bytes = RecordBytes(common::with_context({.record = entry.name}, [&] {
      if (source_ == nullptr) {
        return inflate(payload, entry.uncompressed_size, limits_, entry.data_offset);
      }
      // The compressed bytes, read with pread: inflate never walks a mapping that may shrink.
      common::AlignedBuffer compressed(payload.size());
      source_->copy_out(payload, compressed.span().first(payload.size()), entry.name);
      return inflate(compressed.span().first(payload.size()), entry.uncompressed_size, limits_,
                     entry.data_offset);
    }));
  } else {
    const std::string_view name = method_name(entry.method);
    throw UnsupportedError(
        Errc::kZipUnsupportedMethod,
        name.empty() ? fmt::format("unsupported compression method {}", entry.method)
                     : fmt::format("unsupported compression method {} ({})", entry.method, name),
        {.record = std::string(entry.name),
         .offset = entry.central_directory_offset + kCentralHeaderMethodOffset});
  }
  if (verify_crc) {
    const std::uint32_t actual =
        bytes.is_view() ? crc_of(bytes.bytes(), entry.name) : crc32_of(bytes.bytes());
    if (actual != entry.crc32) throw_crc_mismatch(entry, actual);
  }
  return bytes;
}

void Archive::check_crc(const Entry& entry, std::span<const std::byte> contents) {
  const std::uint32_t actual = crc32_of(contents);
  if (actual != entry.crc32) throw_crc_mismatch(entry, actual);
}

void Archive::verify_crc(const Entry& entry) const {
  (void)read(entry, true);
}

}  // namespace pthload::zip
