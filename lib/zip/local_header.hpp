// Local file headers: the per-record header before each payload (APPNOTE 4.3.7).
#pragma once

#include <cstddef>
#include <span>

#include "zip/entry.hpp"

namespace pthload::zip {

/// Reads `entry`'s local header, checks that it describes the same record as the central
/// directory, and sets `entry.data_offset` from the local name and extra lengths (torch pads
/// payloads to 64 bytes with a local-only `FB` extra field). Sizes and CRC are compared only
/// where the local header carries them (flag bit 3 clear, non-zero). Throws FormatError
/// (kZipRecordOutOfBounds, kZipLocalHeaderInvalid, kZipLocalHeaderMismatch) naming the record.
void resolve_local_header(std::span<const std::byte> file, Entry& entry);

/// The same over part of a file: `from_header` holds its bytes from entry.local_header_offset
/// on, up to the end of the file or at least past the header's name and extra field, and
/// `file_size` is the whole file's. For readers that hold a window of the file, not all of it
/// (zip/image.hpp); the checks and errors are those above.
void resolve_local_header(std::span<const std::byte> from_header, std::uint64_t file_size,
                          Entry& entry);

}  // namespace pthload::zip
