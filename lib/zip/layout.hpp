// Where records lie in the file: no byte may belong to two of them (APPNOTE 4.3.6).
#pragma once

#include <span>

#include "zip/end_records.hpp"
#include "zip/entry.hpp"

namespace pthload::zip {

/// Checks that each record (local header through payload) shares no byte with another record,
/// the central directory or the end records. Overlapping records are how "zip bombs" make a
/// small file expand many times and how two readers get shown different contents. O(n log n).
/// Throws FormatError kZipRecordsOverlap naming the record and the offset.
void check_layout(std::span<const Entry> entries, const EndRecords& end);

}  // namespace pthload::zip
