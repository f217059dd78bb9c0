// The io=read image of a zip archive: reads in file order, neighbouring ranges merged.
#include "zip/image.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/byte_reader.hpp"
#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "zip/central_directory.hpp"
#include "zip/end_records.hpp"

namespace pthload::zip {
namespace {

using Range = std::pair<std::uint64_t, std::uint64_t>;  // offset, size

// The end record (22 bytes), its longest comment, and torch's zip64 locator and end record just
// before it.
constexpr std::uint64_t kTailBytes = 22 + 0xFFFF + 20 + 56 + 4096;
constexpr std::uint64_t kLocalHeaderSize = 30;
// Ranges this close are read as one: a pread costs more than a few KiB of bytes.
constexpr std::uint64_t kMergeGap = std::uint64_t{64} << 10;

using Interval = std::pair<std::uint64_t, std::uint64_t>;  // [begin, end)

// Reads the bytes of [begin, end) that `done` (sorted, disjoint) does not hold, from `cursor`
// on (both are walked in order).
void fill_missing(const common::MappedFile& image, std::uint64_t begin, std::uint64_t end,
                  const std::vector<Interval>& done, std::size_t& cursor) {
  while (cursor < done.size() && done[cursor].second <= begin)
    ++cursor;
  for (std::size_t k = cursor; k < done.size() && done[k].first < end && begin < end; ++k) {
    if (done[k].first > begin) image.fill(begin, done[k].first - begin);
    begin = std::max(begin, done[k].second);
  }
  if (begin < end) image.fill(begin, end - begin);
}

// Reads `ranges` into the image, neighbours merged, skipping bytes `done` already holds;
// returns the intervals it covered (sorted, disjoint).
std::vector<Interval> fill_ranges(const common::MappedFile& image, std::vector<Range> ranges,
                                  const std::vector<Interval>& done = {}) {
  // torch writes the central directory in file order: usually sorted already.
  if (!std::is_sorted(ranges.begin(), ranges.end())) std::sort(ranges.begin(), ranges.end());
  const std::uint64_t size = image.bytes().size();
  std::vector<Interval> covered;
  std::size_t i = 0;
  while (i < ranges.size()) {
    std::uint64_t begin = ranges[i].first;
    std::uint64_t end = std::min(common::checked_add(begin, ranges[i].second).value_or(size), size);
    for (++i; i < ranges.size() && ranges[i].first <= end + kMergeGap; ++i) {
      const auto next_end = common::checked_add(ranges[i].first, ranges[i].second).value_or(size);
      end = std::max(end, std::min(next_end, size));
    }
    if (begin < end) covered.emplace_back(begin, end);
  }
  // A cold file's scattered local headers (a 1 GB checkpoint's 83, one per record) are then
  // read from the disk together, not one seek after another.
  if (covered.size() > 1) {
    for (const auto& [begin, end] : covered)
      image.will_fill(begin, end - begin);
  }
  std::size_t cursor = 0;
  for (const auto& [begin, end] : covered)
    fill_missing(image, begin, end, done, cursor);
  return covered;
}

// An archive whose end records or central directory make no sense — most often a truncated
// download — is reported by parse() from the tail already read (the end records' search reads
// nothing else). Only a small file is read whole, so that an unusual layout is reported exactly
// as over a mapping; a 10 GB download cut short must not cost 10 GB of memory to refuse.
void fill_broken(const common::MappedFile& image) {
  constexpr std::uint64_t kReadWholeUpTo = std::uint64_t{16} << 20;
  if (image.bytes().size() <= kReadWholeUpTo) image.fill(0, image.bytes().size());
}

}  // namespace

std::optional<CentralDirectory> fill_archive_image(
    const common::MappedFile& image, const Limits& limits,
    const std::function<bool(const Entry&)>& leave_out) {
  const auto file = image.bytes();
  const std::uint64_t size = file.size();
  const std::uint64_t tail = std::min(size, kTailBytes);
  image.fill(size - tail, tail);
  CentralDirectory directory;
  try {
    directory.end = read_end_records(file);
    const EndRecords& end = directory.end;
    if (end.central_directory_offset < size - tail) {
      image.fill(end.central_directory_offset, size - tail - end.central_directory_offset);
    }
    directory.entries = read_central_directory(file, end, limits);
  } catch (const FormatError&) {
    fill_broken(image);
    return std::nullopt;
  } catch (const UnsupportedError&) {
    fill_broken(image);
    return std::nullopt;
  }
  const EntryList& entries = directory.entries;
  std::vector<Range> ranges;
  ranges.reserve(entries.size());
  for (const Entry& entry : entries)
    ranges.emplace_back(entry.local_header_offset, kLocalHeaderSize);
  const std::vector<Interval> headers_read = fill_ranges(image, ranges);
  ranges.clear();
  for (const Entry& entry : entries) {
    if (!common::fits(entry.local_header_offset, kLocalHeaderSize, size)) continue;
    const auto* header = file.data() + entry.local_header_offset;
    const std::uint64_t variable = std::uint64_t{common::load_le<std::uint16_t>(header + 26)} +
                                   common::load_le<std::uint16_t>(header + 28);
    ranges.emplace_back(entry.local_header_offset + kLocalHeaderSize, variable);
    const std::uint64_t data_offset = entry.local_header_offset + kLocalHeaderSize + variable;
    if (!leave_out(entry)) ranges.emplace_back(data_offset, entry.compressed_size);
  }
  // Records of many small storages sit between their headers: the first pass read them.
  (void)fill_ranges(image, std::move(ranges), headers_read);
  return directory;
}

}  // namespace pthload::zip
