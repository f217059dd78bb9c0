// The io=read image of a zip archive: reads in file order, neighbouring ranges merged.
#include "zip/image.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/byte_reader.hpp"
#include "common/checked.hpp"
#include "common/fresh_memory.hpp"
#include "pthload/error.hpp"
#include "zip/central_directory.hpp"
#include "zip/end_records.hpp"
#include "zip/local_header.hpp"
#include "zip/signatures.hpp"

namespace pthload::zip {
namespace {

using Range = std::pair<std::uint64_t, std::uint64_t>;  // offset, size

// The end record (22 bytes), its longest comment, and torch's zip64 locator and end record just
// before it.
constexpr std::uint64_t kTailBytes = 22 + 0xFFFF + 20 + 56 + 4096;
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

// Reads local headers through one reused buffer: a window of the file that moves forward, each
// read covering the headers that lie close together (most of a 100 000-record archive at a
// time), or one header and a little after it where records are large.
class HeaderWindow {
 public:
  HeaderWindow(const common::FileReader& reader, std::uint64_t file_size)
      : reader_(reader), file_size_(file_size) {}

  // The file's bytes from `offset` (before the end of the file) on: at least `needed` of them,
  // fewer only where the file ends first, and on to `wanted_end` where that fits the buffer.
  // Valid until the next call. Throws IoError, std::bad_alloc.
  std::span<const std::byte> from(std::uint64_t offset, std::uint64_t needed,
                                  std::uint64_t wanted_end) {
    const std::uint64_t needed_end = std::min(file_size_, offset + needed);
    if (offset < begin_ || needed_end > begin_ + size_) move_to(offset, needed, wanted_end);
    const auto skipped = static_cast<std::size_t>(offset - begin_);
    return {buffer_.get() + skipped, size_ - skipped};
  }

 private:
  // One large block (common/fresh_memory.hpp), reused from window to window.
  static constexpr std::uint64_t kWindowBytes = common::kLargeBlockBytes;

  void move_to(std::uint64_t offset, std::uint64_t needed, std::uint64_t wanted_end) {
    const std::uint64_t end = std::min({file_size_, std::max(offset + needed, wanted_end),
                                        offset + std::max(needed, kWindowBytes)});
    const auto size = static_cast<std::size_t>(end - offset);
    // Grown as needed, never zero-filled: scattered headers (a few large records) need a few KiB.
    if (size > capacity_) {
      const std::size_t capacity =
          std::max(size, std::min<std::size_t>(2 * capacity_, kWindowBytes));
      buffer_ = common::make_large_block(capacity);
      capacity_ = capacity;  // only once the block is there: make_large_block may throw
    }
    reader_.read_at(offset, std::span(buffer_.get(), size));
    begin_ = offset;
    size_ = size;
  }

  const common::FileReader& reader_;
  std::uint64_t file_size_;
  common::LargeBlock buffer_;
  std::size_t capacity_ = 0;
  std::uint64_t begin_ = 0;
  std::size_t size_ = 0;
};

// Reads and checks every entry's local header through a HeaderWindow, setting data_offset;
// returns false, leaving the rest to Archive::parse, when one fails its checks. Headers out of
// file order (torch writes them in order) cost more reads, nothing else. Throws IoError.
bool resolve_local_headers(const common::MappedFile& image, EntryList& entries) {
  const std::uint64_t file_size = image.bytes().size();
  // A header with its name and extra field (torch's are under 200 bytes).
  constexpr std::uint64_t kHeaderSlack = 4096;
  const auto slack_end = [&](std::uint64_t offset) {
    return common::checked_add(offset, kHeaderSlack).value_or(file_size);
  };
  // Headers this close are read together, as fill_ranges merges them: each run's first entry
  // and the end of the bytes read for it.
  std::vector<std::pair<std::size_t, std::uint64_t>> runs;
  std::uint64_t previous = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::uint64_t offset = entries[i].local_header_offset;
    // An entry before its predecessor in the file starts a run (the difference wraps).
    if (i == 0 || offset - previous > kMergeGap) {
      if (i != 0) runs.back().second = slack_end(previous);
      runs.emplace_back(i, 0);
    }
    previous = offset;
  }
  if (!runs.empty()) runs.back().second = slack_end(previous);
  // A cold file's scattered headers are then read from the disk together (see fill_ranges).
  if (runs.size() > 1) {
    for (const auto& [first, end] : runs) {
      const std::uint64_t begin = entries[first].local_header_offset;
      if (begin < end) image.will_fill(begin, end - begin);
    }
  }
  HeaderWindow window(*image.reader(), file_size);
  std::size_t run = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (run + 1 < runs.size() && runs[run + 1].first == i) ++run;
    Entry& entry = entries[i];
    const std::uint64_t offset = entry.local_header_offset;
    if (offset >= file_size || file_size - offset < kLocalHeaderSize) return false;
    auto bytes = window.from(offset, kLocalHeaderSize, runs[run].second);
    const std::uint64_t header_size = kLocalHeaderSize +
                                      common::load_le<std::uint16_t>(bytes.data() + 26) +
                                      common::load_le<std::uint16_t>(bytes.data() + 28);
    // Usually the window holds the name and extra field already.
    if (bytes.size() < header_size) bytes = window.from(offset, header_size, runs[run].second);
    try {
      resolve_local_header(bytes, file_size, entry);
    } catch (const FormatError&) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<CentralDirectory> fill_archive_image(
    const common::MappedFile& image, const Limits& limits,
    const std::function<bool(const Entry&)>& leave_out, LocalHeaders local_headers) {
  const auto file = image.bytes();
  const std::uint64_t size = file.size();
  const std::uint64_t tail = std::min(size, kTailBytes);
  image.fill(size - tail, tail);
  // The zip64 end record lies before its locator by its size, which extensible data (APPNOTE
  // 4.3.14) may put before the tail: its fixed fields are read too (read_zip64 reads no more).
  if (const auto zip64 = zip64_end_record_start(file); zip64 && *zip64 < size - tail) {
    image.fill(*zip64, std::min(kZip64EndRecordMinSize, size - tail - *zip64));
  }
  CentralDirectory directory;
  try {
    const EndRecords end = read_end_records(file);
    if (end.central_directory_offset < size - tail) {
      image.fill(end.central_directory_offset, size - tail - end.central_directory_offset);
    }
    directory = read_central_directory(file, end, limits);
  } catch (const FormatError&) {
    fill_broken(image);
    return std::nullopt;
  } catch (const UnsupportedError&) {
    fill_broken(image);
    return std::nullopt;
  }
  std::vector<Range> ranges;
  if (local_headers == LocalHeaders::kResolved && image.reader() != nullptr &&
      resolve_local_headers(image, directory.entries)) {
    directory.local_headers_resolved = true;
    for (const Entry& entry : directory.entries) {
      if (!leave_out(entry)) ranges.emplace_back(entry.data_offset, entry.compressed_size);
    }
    (void)fill_ranges(image, std::move(ranges));
    return directory;
  }
  const EntryList& entries = directory.entries;
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
