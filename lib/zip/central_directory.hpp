// The central directory: one file header per record, the archive's index (APPNOTE 4.3.12, 4.5.3).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "common/fresh_memory.hpp"

#include "pthload/limits.hpp"
#include "zip/end_records.hpp"
#include "zip/entry.hpp"
#include "zip/name_index.hpp"

namespace pthload::zip {

/// An archive's entries: a 100 000-record index (6 MB) gets a mapping of its own.
using EntryList = std::vector<Entry, common::LargeArrayAllocator<Entry>>;

/// What read_end_records and read_central_directory found in a file: handed from the reader
/// that fills an image (zip/image.hpp) to Archive::parse, so a 100 000-record index is parsed
/// once. Its views point into that file's bytes.
struct CentralDirectory {
  EndRecords end;
  EntryList entries;
  /// Every entry's local header was read and checked (resolve_local_header) where the bytes
  /// were read, and its data_offset set: Archive::parse need not, and the image need not hold
  /// the headers.
  bool local_headers_resolved = false;
  /// The entries' names, indexed as they were read (NameIndex). Archive::parse indexes them
  /// itself where this does not cover every entry (a directory made some other way).
  NameIndex names;
};

/// Parses every central directory header that `end` describes, resolving zip64 extra fields,
/// and indexes their names; `end` is copied into the result. The entries' `data_offset` is left
/// 0: only the local headers know it. Names that repeat are only noted (NameIndex::first_repeat):
/// Archive::parse refuses them. Throws FormatError (kZipCentralDirectoryEntryInvalid,
/// kZip64ExtraFieldInvalid, kZipEntryCountMismatch, kZipLimitExceeded) or UnsupportedError
/// (kZipMultiDiskUnsupported), naming the entry and the file offset; std::bad_alloc.
[[nodiscard]] CentralDirectory read_central_directory(std::span<const std::byte> file,
                                                      const EndRecords& end, const Limits& limits);

}  // namespace pthload::zip
