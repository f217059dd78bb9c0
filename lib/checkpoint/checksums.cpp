// content_checksums(): Tensor::content_checksum() of many tensors, the small views of the file
// among them read together in file order (see tensor.hpp).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/content_checksum.hpp"
#include "checkpoint/state.hpp"
#include "common/aligned_buffer.hpp"
#include "common/content_hash.hpp"
#include "common/file_reader.hpp"
#include "common/mapped_file.hpp"
#include "pthload/error.hpp"
#include "pthload/tensor.hpp"

namespace pthload {
namespace {

// One pread fills at most this much: the storages of a 100 000-tensor optimizer state lie about
// 200 bytes apart, interleaved with their local headers, so a window holds some 5 000 of them.
constexpr std::size_t kWindowBytes = std::size_t{1} << 20;
// Tensors larger than this are read on their own (content_checksum()): a pread of that many
// bytes costs more than the system call, and they need no window.
constexpr std::uint64_t kLargestBatched = kWindowBytes / 4;
// Bytes between two ranges that are read rather than split into a second pread.
constexpr std::uint64_t kMergeGap = std::uint64_t{64} << 10;

// A tensor whose checksum is XXH3 of one range of a file: contiguous, not packed, a view of the
// file, small.
struct BatchedRange {
  const common::FileReader* reader;
  std::uint64_t offset;
  std::uint64_t size;
  std::size_t tensor;  // its position in the caller's list
};

// The range `tensor` shows of its file, if content_checksum() would hash one pread of it.
std::optional<BatchedRange> batched_range(const Tensor& tensor, std::size_t position) {
  if (!tensor.has_storage() || !tensor.storage().is_file_view()) return std::nullopt;
  if (packed_per_byte(tensor.dtype()) > 1 || !tensor.is_contiguous()) return std::nullopt;
  const std::uint64_t size = tensor.nbytes();
  if (size == 0 || size > kLargestBatched) return std::nullopt;
  const std::span<const std::byte> storage = tensor.storage().bytes();
  const std::uint64_t first =
      static_cast<std::uint64_t>(tensor.storage_offset()) * element_size(tensor.dtype());
  // The torch layer keeps every tensor inside its storage; a range that is not is left to
  // content_checksum(), which reports it.
  if (first > storage.size() || size > storage.size() - first) return std::nullopt;
  const auto& view =
      std::get<internal::FileView>(internal::Access::state(tensor.storage()).placement);
  const auto offset = view.file->file_offset_of(
      storage.subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(size)));
  if (!offset || view.file->reader() == nullptr) return std::nullopt;
  return BatchedRange{view.file->reader(), *offset, size, position};
}

// Hashes every range of `ranges` (sorted by file, then offset) into `checksums`, reading
// neighbouring ranges of a file with one pread. False when a read failed: the caller then asks
// each tensor, in order, so that the error is the one the first failing tensor gives.
bool hash_ranges(std::span<const BatchedRange> ranges, std::vector<std::uint64_t>& checksums) {
  if (ranges.empty()) return true;
  // Each read: the ranges [first, last) and the bytes from the first's offset to `end`.
  struct Read {
    std::size_t first;
    std::size_t last;
    std::uint64_t end;
  };
  std::vector<Read> reads;
  std::uint64_t largest = 0;
  for (std::size_t first = 0; first < ranges.size();) {
    const BatchedRange& start = ranges[first];
    std::uint64_t end = start.offset + start.size;
    std::size_t last = first + 1;
    while (last < ranges.size() && ranges[last].reader == start.reader &&
           ranges[last].offset <= end + kMergeGap &&
           ranges[last].offset + ranges[last].size - start.offset <= kWindowBytes) {
      end = std::max(end, ranges[last].offset + ranges[last].size);
      ++last;
    }
    reads.push_back({first, last, end});
    largest = std::max(largest, end - start.offset);
    first = last;
  }
  // As large as the largest read: a few small tensors do not cost a MiB.
  common::AlignedBuffer window(static_cast<std::size_t>(largest));
  for (const Read& read : reads) {
    const BatchedRange& start = ranges[read.first];
    const auto bytes = window.span().first(static_cast<std::size_t>(read.end - start.offset));
    try {
      start.reader->read_at(start.offset, bytes);
    } catch (const IoError&) {
      return false;
    }
    for (std::size_t i = read.first; i < read.last; ++i) {
      const BatchedRange& range = ranges[i];
      checksums[range.tensor] = common::ContentHash::of(
          bytes.subspan(static_cast<std::size_t>(range.offset - start.offset),
                        static_cast<std::size_t>(range.size)));
    }
  }
  return true;
}

}  // namespace

std::vector<std::uint64_t> content_checksums(std::span<const Tensor* const> tensors) {
  std::vector<std::uint64_t> checksums(tensors.size());
  std::vector<BatchedRange> ranges;
  std::vector<std::size_t> others;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (auto range = batched_range(*tensors[i], i)) {
      ranges.push_back(*range);
    } else {
      others.push_back(i);
    }
  }
  const auto in_file_order = [](const BatchedRange& a, const BatchedRange& b) {
    return a.reader != b.reader ? std::less<>()(a.reader, b.reader) : a.offset < b.offset;
  };
  // A checkpoint's tensors come in the order of its storage records, most often: no sort then.
  if (!std::is_sorted(ranges.begin(), ranges.end(), in_file_order)) {
    std::sort(ranges.begin(), ranges.end(), in_file_order);
  }
  if (!hash_ranges(ranges, checksums)) {
    // A read failed (the file shrank): the error is the one asking each tensor in turn gives.
    for (std::size_t i = 0; i < tensors.size(); ++i)
      checksums[i] = tensors[i]->content_checksum();
    return checksums;
  }
  // In order: every tensor before the first of these to fail was hashed above, so what that one
  // throws is what asking each tensor in turn would throw first. One window for all of them.
  common::AlignedBuffer window;
  for (const std::size_t i : others)
    checksums[i] = internal::content_checksum(*tensors[i], window);
  return checksums;
}

}  // namespace pthload
