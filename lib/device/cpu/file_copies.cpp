// read_copies: the copies cut into units — a piece of a large copy, or a run of small copies of
// adjacent records, read with one pread — shared among threads by device/worker_threads.
#include "device/cpu/file_copies.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/aligned_buffer.hpp"
#include "common/fresh_memory.hpp"
#include "device/worker_threads.hpp"

namespace pthload::device::cpu {
namespace {

// A copy this small joins its neighbours in the file: a 100 000-tensor optimizer state's
// storages of 16 bytes each cost one pread per kRunBytes of file, not one each.
constexpr std::size_t kSmallCopyBytes = std::size_t{1} << 20;
// The most file a run of small copies spans: it is read into a scratch buffer first, which a
// reading thread gets once and reuses. 1 MiB of it holds 8 000 records of an optimizer state;
// 8 MiB (a chunk, as before) added the cost of its fresh memory to a 100 000-tensor copy load
// and 7 MiB to its peak memory, for 12 preads fewer.
constexpr std::size_t kRunBytes = std::size_t{1} << 20;
// What may lie between one record's data and the next record's local header: the first's data
// descriptor (signature, CRC-32 and two sizes, 8 bytes each with zip64), APPNOTE 4.3.9.
constexpr std::size_t kMaxDescriptorBytes = 24;

// Either `count` > 1 small copies starting at `first`, read as the one range from the first's
// source to the last's end, or a piece [offset, offset + size) of the one copy `first`.
struct Unit {
  const FileCopy* first;
  std::size_t count;
  std::size_t offset;
  std::size_t size;
};

// Whether `next` can join a run that starts at `first` and ends at `end` (sources in file
// order): only its own local header and the previous record's data descriptor lie between, and
// the run stays within one chunk.
bool joins(const FileCopy& first, const std::byte* end, const FileCopy& next) noexcept {
  if (next.file != first.file || next.source.size() >= kSmallCopyBytes ||
      next.header_bytes == FileCopy::kNoHeader || next.source.data() < end) {
    return false;
  }
  const auto gap = static_cast<std::size_t>(next.source.data() - end);
  return gap >= next.header_bytes && gap - next.header_bytes <= kMaxDescriptorBytes &&
         static_cast<std::size_t>(next.source.data() + next.source.size() - first.source.data()) <=
             kRunBytes;
}

std::vector<Unit> units_of(std::span<const FileCopy> copies) {
  std::vector<Unit> units;
  for (std::size_t i = 0; i < copies.size();) {
    const FileCopy& copy = copies[i];
    if (copy.source.size() >= kSmallCopyBytes) {
      for (std::size_t offset = 0; offset < copy.source.size(); offset += kCopyChunkBytes)
        units.push_back({&copy, 1, offset, std::min(kCopyChunkBytes, copy.source.size() - offset)});
      ++i;
      continue;
    }
    const std::byte* end = copy.source.data() + copy.source.size();
    std::size_t count = 1;
    while (i + count < copies.size() && joins(copy, end, copies[i + count])) {
      end = copies[i + count].source.data() + copies[i + count].source.size();
      ++count;
    }
    units.push_back({&copy, count, 0, static_cast<std::size_t>(end - copy.source.data())});
    i += count;
  }
  return units;
}

// Reads one unit; returns the bytes of storages it filled. A run goes through `scratch`.
std::size_t read_unit(const Unit& unit, common::AlignedBuffer& scratch) {
  const FileCopy& first = *unit.first;
  if (unit.count == 1) {
    if (unit.size > 0) {
      // Fresh memory this thread fills now, by pread (common/fresh_memory.hpp).
      common::prepare_for_pread(first.destination.subspan(unit.offset, unit.size));
      first.file->copy_out(first.source.subspan(unit.offset, unit.size),
                           first.destination.subspan(unit.offset, unit.size), first.record);
    }
    return unit.size;
  }
  if (scratch.size() < unit.size) scratch = common::AlignedBuffer(unit.size);
  first.file->copy_out({first.source.data(), unit.size}, scratch.span().first(unit.size),
                       first.record);
  std::size_t bytes = 0;
  for (std::size_t k = 0; k < unit.count; ++k) {
    const FileCopy& copy = unit.first[k];
    if (copy.source.empty()) continue;
    std::memcpy(copy.destination.data(),
                scratch.data() + (copy.source.data() - first.source.data()), copy.source.size());
    bytes += copy.source.size();
  }
  return bytes;
}

}  // namespace

unsigned copy_threads_for(std::uint64_t total_bytes, unsigned requested) noexcept {
  if (total_bytes < kParallelCopyBytes) return 1;
  return worker_threads(requested, (total_bytes + kCopyChunkBytes - 1) / kCopyChunkBytes);
}

void read_copies(std::span<const FileCopy> copies, unsigned threads, Progress& progress) {
  const std::vector<Unit> units = units_of(copies);
  if (threads <= 1) {
    common::AlignedBuffer scratch;
    for (const Unit& unit : units)
      progress.add(read_unit(unit, scratch));
    return;
  }
  run_on_threads(units.size(), threads, [&] {
    return [&, scratch = common::AlignedBuffer()](std::size_t i) mutable {
      progress.add(read_unit(units[i], scratch));
    };
  });
}

}  // namespace pthload::device::cpu
