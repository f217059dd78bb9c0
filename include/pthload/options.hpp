// What a caller can set when opening or loading a checkpoint: limits and checks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pthload/device.hpp"

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
};

/// Options for reading a checkpoint. An aggregate: `load(p, {.map_location = map_to("cpu")})`.
struct LoadOptions {
  /// Where each storage goes (see map_to, map_dict, or any callable). Empty: where its location
  /// tag says, as torch.load without map_location.
  MapLocation map_location{};
  /// CPU storages as owned, 64-byte aligned copies instead of zero-copy views of the mapped
  /// file (views are read-only and keep the file mapped).
  bool copy = false;
  /// Check each record's CRC-32 against the central directory. torch itself never does, and
  /// files saved with CRC computation disabled are valid, so this is off by default.
  bool verify_crc = false;
  Limits limits{};
};

}  // namespace pthload
