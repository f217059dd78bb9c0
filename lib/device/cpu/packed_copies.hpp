// Owned memory for the small storages a copy load copies: 64-byte aligned pieces of one block
// per load. An optimizer state's 100 000 storages of 16 bytes each took an aligned allocation
// apiece, which cost more time and memory than their bytes (a 1.3 MB copy took 26 ms and 20 MiB
// of peak memory beyond the view load's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace pthload::device::cpu {

/// The pieces of one block, handed out in order to the storages that will hold them; the block
/// is freed when its last holder lets go (internal::PackedCopy). So a storage kept after its
/// checkpoint keeps the whole block, at most kMaxPieceBytes per storage of the load, as a
/// storage keeps the arena its state lives in. Not thread-safe: the loading thread takes the
/// pieces, the reading threads only fill them.
class PackedCopies {
 public:
  /// Storages larger than this get a buffer of their own.
  static constexpr std::uint64_t kMaxPieceBytes = 4096;
  /// Every piece starts at a multiple of this from the block's start (as aligned).
  static constexpr std::size_t kPieceAlignment = 64;

  /// Whether a storage of `nbytes` belongs in a block (non-empty, at most kMaxPieceBytes).
  [[nodiscard]] static bool is_packed(std::uint64_t nbytes) noexcept {
    return nbytes > 0 && nbytes <= kMaxPieceBytes;
  }

  /// Makes room for one more storage of `nbytes` (is_packed), before any piece is taken.
  void expect(std::uint64_t nbytes) noexcept;

  /// A piece of `nbytes` bytes (is_packed), 64-byte aligned, or an empty span where the room
  /// expected is used up (the caller then allocates on its own). The block is allocated with the
  /// first piece: a mapping of its own from common::kLargeBlockBytes on. Throws std::bad_alloc.
  [[nodiscard]] std::span<std::byte> take(std::uint64_t nbytes);

  /// What a storage holding a piece keeps (null before the first take()).
  [[nodiscard]] std::shared_ptr<const std::byte> block() const noexcept { return block_; }

 private:
  std::size_t expected_bytes_ = 0;
  std::shared_ptr<std::byte> block_;
  std::byte* cursor_ = nullptr;
  std::size_t left_ = 0;
};

}  // namespace pthload::device::cpu
