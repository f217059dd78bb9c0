// Where records lie in the file: no byte may belong to two of them (APPNOTE 4.3.6).
#include "zip/layout.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
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

// The order extents are checked in: by start, then end.
bool starts_before(const Extent& a, const Extent& b) noexcept {
  return a.start != b.start ? a.start < b.start : a.end < b.end;
}

// Walks extents in order of starts and notes the first that begins before another one ends:
// the one reaching furthest so far, which it overlaps.
class Sweep {
 public:
  // Takes the next extent; false, noting nothing, when it comes before the previous one.
  bool add(const Extent& extent) noexcept {
    if (count_ != 0 && starts_before(extent, previous_)) return false;
    if (count_ != 0 && !overlap_ && extent.start < reaching_furthest_.end) {
      overlap_ = {extent, reaching_furthest_};
    }
    if (count_ == 0 || extent.end > reaching_furthest_.end) reaching_furthest_ = extent;
    previous_ = extent;
    ++count_;
    return true;
  }

  // Throws FormatError kZipRecordsOverlap for the first overlap noted, if any.
  void report() const {
    if (!overlap_) return;
    const auto& [extent, reached] = *overlap_;
    const Entry* named = extent.entry != nullptr ? extent.entry : reached.entry;
    throw FormatError(Errc::kZipRecordsOverlap,
                      fmt::format("{} overlaps {}", describe(extent), describe(reached)),
                      {.record = named != nullptr ? std::string(named->name) : std::string(),
                       .offset = extent.start});
  }

 private:
  std::size_t count_ = 0;
  Extent previous_{};
  Extent reaching_furthest_{};
  std::optional<std::pair<Extent, Extent>> overlap_;
};

Extent extent_of(const Entry& entry) noexcept {
  // The data descriptor after a payload is left out: torch's loader never reads it, and
  // nothing else is allowed to sit there either way.
  return {entry.local_header_offset, entry.data_offset + entry.compressed_size, &entry, nullptr};
}

}  // namespace

void check_layout(std::span<const Entry> entries, const EndRecords& end) {
  std::vector<Extent> structures;
  if (end.central_directory_size != 0) {
    structures.push_back({end.central_directory_offset,
                          end.central_directory_offset + end.central_directory_size, nullptr,
                          "central directory"});
  }
  if (end.zip64_end_record_offset) {
    structures.push_back(
        {*end.zip64_end_record_offset, end.zip64_end_record_end, nullptr, "zip64 end record"});
  }
  if (end.zip64_locator_offset) {
    structures.push_back({*end.zip64_locator_offset, *end.zip64_locator_offset + kZip64LocatorSize,
                          nullptr, "zip64 locator"});
  }
  structures.push_back({end.end_record_offset, end.end_record_end, nullptr, "end record"});

  // torch writes records in file order, and the structures above follow them: then the records
  // are checked where they lie, in one pass (sorting 100 000 sorted extents took 8% of a
  // 100 000-tensor load, and a copy of them 3 MB).
  Sweep in_place;
  bool sorted = true;
  for (const Entry& entry : entries) {
    if (!in_place.add(extent_of(entry))) {
      sorted = false;
      break;
    }
  }
  for (std::size_t i = 0; sorted && i < structures.size(); ++i)
    sorted = in_place.add(structures[i]);
  if (sorted) {
    in_place.report();
    return;
  }

  std::vector<Extent> extents;
  extents.reserve(entries.size() + structures.size());
  for (const Entry& entry : entries)
    extents.push_back(extent_of(entry));
  extents.insert(extents.end(), structures.begin(), structures.end());
  std::sort(extents.begin(), extents.end(), starts_before);
  Sweep sorted_extents;
  for (const Extent& extent : extents)
    (void)sorted_extents.add(extent);
  sorted_extents.report();
}

}  // namespace pthload::zip
