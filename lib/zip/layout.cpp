// Where records lie in the file: no byte may belong to two of them (APPNOTE 4.3.6).
#include "zip/layout.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "pthload/error.hpp"
#include "zip/signatures.hpp"

namespace pthload::zip {
namespace {

struct Extent {
  std::uint64_t start;
  std::uint64_t end;
  const Entry* entry;     ///< null for the central directory and end records
  const char* structure;  ///< what it is when `entry` is null
};

std::string describe(const Extent& extent) {
  const std::string what = extent.entry != nullptr ? fmt::format("record {:?}", extent.entry->name)
                                                   : std::string(extent.structure);
  return fmt::format("{} [{:#x}, {:#x})", what, extent.start, extent.end);
}

}  // namespace

void check_layout(std::span<const Entry> entries, const EndRecords& end) {
  std::vector<Extent> extents;
  extents.reserve(entries.size() + 4);
  for (const Entry& entry : entries) {
    // The data descriptor after a payload is left out: torch's loader never reads it, and
    // nothing else is allowed to sit there either way.
    extents.push_back(
        {entry.local_header_offset, entry.data_offset + entry.compressed_size, &entry, nullptr});
  }
  if (end.central_directory_size != 0) {
    extents.push_back({end.central_directory_offset,
                       end.central_directory_offset + end.central_directory_size, nullptr,
                       "central directory"});
  }
  if (end.zip64_end_record_offset) {
    extents.push_back(
        {*end.zip64_end_record_offset, end.zip64_end_record_end, nullptr, "zip64 end record"});
  }
  if (end.zip64_locator_offset) {
    extents.push_back({*end.zip64_locator_offset, *end.zip64_locator_offset + kZip64LocatorSize,
                       nullptr, "zip64 locator"});
  }
  extents.push_back({end.end_record_offset, end.end_record_end, nullptr, "end record"});

  // torch writes records in file order, and the structures above follow them: the check is
  // linear then (sorting 100 000 sorted extents anyway took 8% of a 100 000-tensor load).
  const auto by_start = [](const Extent& a, const Extent& b) {
    return a.start != b.start ? a.start < b.start : a.end < b.end;
  };
  if (!std::is_sorted(extents.begin(), extents.end(), by_start)) {
    std::sort(extents.begin(), extents.end(), by_start);
  }
  const Extent* reaching_furthest = nullptr;
  for (const Extent& extent : extents) {
    if (reaching_furthest != nullptr && extent.start < reaching_furthest->end) {
      const Entry* named = extent.entry != nullptr ? extent.entry : reaching_furthest->entry;
      throw FormatError(
          Errc::kZipRecordsOverlap,
          fmt::format("{} overlaps {}", describe(extent), describe(*reaching_furthest)),
          {.record = named != nullptr ? std::string(named->name) : std::string(),
           .offset = extent.start});
    }
    if (reaching_furthest == nullptr || extent.end > reaching_furthest->end) {
      reaching_furthest = &extent;
    }
  }
}

}  // namespace pthload::zip
