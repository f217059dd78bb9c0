// Bounds on what a checkpoint may make pthload do, apart from the other load options: the zip
// and pickle layers need these and nothing else of options.hpp (not devices, not std::function).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pthload {

/// Bounds on what a file may make pthload do. Each one defends against a hostile file; the
/// defaults are far above anything torch.save writes. Exceeding one throws a FormatError that
/// names the limit and the byte offset.
struct Limits {
  /// Records in one zip archive (torch writes one per storage, plus a handful).
  std::uint64_t max_zip_entries = 16'000'000;
  /// Bytes one deflated record may inflate to. Independently of this, a declared size the
  /// compressed bytes cannot produce (deflate expands at most ~1032x) is refused.
  std::uint64_t max_inflated_record_bytes = std::uint64_t{64} << 30;
  /// Entries on the pickle machine's stack (including marks' contents).
  std::size_t max_pickle_stack = 16'000'000;
  /// Entries in the pickle memo.
  std::size_t max_pickle_memo = 16'000'000;
  /// How deeply containers may nest in the value tree.
  std::size_t max_pickle_nesting = 10'000;
  /// Values created by one pickle (every int, string, tuple... counts one).
  std::size_t max_pickle_values = 200'000'000;
  /// Bytes Tensor::contiguous_bytes(), copy_to() and content_checksum() read of a view that shows
  /// more than its storage holds (stride 0, expand): a file of a few hundred bytes can claim
  /// 2^40 elements over 4 bytes. Views that do not overlap themselves are never limited. A
  /// tensor keeps the value of the open() or load() that made it.
  std::uint64_t max_overlapping_view_bytes = std::uint64_t{1} << 30;
};

}  // namespace pthload
