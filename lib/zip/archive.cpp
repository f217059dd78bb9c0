// A zip archive over borrowed bytes: index, lookup and record contents (APPNOTE 4.3).
#include "zip/archive.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include <fmt/format.h>

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

// Sorts by hash, stably (entries with one hash stay in index order). Hashes are uniform, so a
// radix sort of 16-bit digits is linear: comparison sorting 100 000 of them took 7% of a
// 100 000-tensor load. Small archives (every real one but state dicts of many tensors) use
// std::sort, whose cost there is nothing and which needs no histogram.
template <typename Key, typename Allocator>
void sort_by_hash(std::vector<Key, Allocator>& keys) {
  constexpr std::size_t kRadixFrom = 4096;
  if (keys.size() < kRadixFrom) {
    std::stable_sort(keys.begin(), keys.end(),
                     [](const Key& a, const Key& b) { return a.hash < b.hash; });
    return;
  }
  constexpr unsigned kDigitBits = 16;
  constexpr std::size_t kBuckets = std::size_t{1} << kDigitBits;
  std::vector<Key, Allocator> scratch(keys.size());
  std::vector<std::size_t> starts(kBuckets);
  for (unsigned shift = 0; shift < sizeof(std::size_t) * 8; shift += kDigitBits) {
    std::fill(starts.begin(), starts.end(), 0);
    for (const Key& key : keys)
      ++starts[(key.hash >> shift) & (kBuckets - 1)];
    std::size_t total = 0;
    for (std::size_t& start : starts)
      total += std::exchange(start, total);
    for (const Key& key : keys)
      scratch[starts[(key.hash >> shift) & (kBuckets - 1)]++] = key;
    keys.swap(scratch);
  }
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
  CentralDirectory directory;
  directory.end = read_end_records(file);
  directory.entries = read_central_directory(file, directory.end, limits);
  return index(file, limits, std::move(directory));
}

Archive Archive::index(std::span<const std::byte> file, const Limits& limits,
                       CentralDirectory directory) {
  Archive archive(file, limits);
  const bool local_headers_resolved = directory.local_headers_resolved;
  archive.end_ = directory.end;
  archive.entries_ = std::move(directory.entries);
  const auto& entries = archive.entries_;

  // Indices (not pointers or views) keep the Archive trivially copyable and movable.
  auto& by_name = archive.by_name_;
  by_name.resize(entries.size());
  for (std::size_t i = 0; i < by_name.size(); ++i) {
    by_name[i] = {std::hash<std::string_view>{}(entries[i].name), i};
  }
  sort_by_hash(by_name);
  // Names that share a hash are ordered by name, so that equal names sit side by side.
  const auto by_name_then_index = [&](const NameKey& a, const NameKey& b) {
    const Entry& left = entries[a.index];
    const Entry& right = entries[b.index];
    return left.name != right.name ? left.name < right.name : a.index < b.index;
  };
  for (auto run = by_name.begin(); run != by_name.end();) {
    const auto run_end = std::find_if(run + 1, by_name.end(),
                                      [&](const NameKey& key) { return key.hash != run->hash; });
    if (run_end - run > 1) std::sort(run, run_end, by_name_then_index);
    run = run_end;
  }
  // Two records with one name would let two readers pick different ones. Equal names have equal
  // hashes, so they sit side by side.
  for (std::size_t i = 1; i < by_name.size(); ++i) {
    const Entry& later = entries[by_name[i].index];
    if (by_name[i].hash == by_name[i - 1].hash &&
        later.name == entries[by_name[i - 1].index].name) {
      throw FormatError(
          Errc::kZipDuplicateName, "name appears twice in the central directory",
          {.record = std::string(later.name), .offset = later.central_directory_offset});
    }
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
  const std::size_t hash = std::hash<std::string_view>{}(name);
  auto it = std::lower_bound(by_name_.begin(), by_name_.end(), hash,
                             [](const NameKey& key, std::size_t h) { return key.hash < h; });
  for (; it != by_name_.end() && it->hash == hash; ++it) {
    if (entries_[it->index].name == name) return &entries_[it->index];
  }
  return nullptr;
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
