// Fresh memory faulted in ahead of need by a thread of its own, while the thread that will fill
// it is busy with something else. On virtual machines, faulting in fresh memory costs about
// 0.45 ms per MiB in small pages (common/huge_pages.hpp), and opening a checkpoint of 100 000
// tensors fills some 50 MiB of arena blocks (its value tree, its storages) while running the
// pickle, when both cores of a two-core machine are busy. Reading the archive's index before
// that leaves one core idle: the blocks are faulted in there.
#pragma once

#include <cstddef>
#include <stop_token>
#include <thread>
#include <vector>

#include "common/large_arrays.hpp"

namespace pthload::common {

/// Blocks of kBlockBytes a thread maps and faults in, one after another, for BumpArena (which
/// takes its largest blocks from here where one is ready: take()). Blocks no one took are
/// unmapped when this is destroyed. Memory is only ever faulted in ahead, never waited for: a
/// block not ready yet is simply not taken, and its taker maps a fresh one.
class WarmBlocks {
 public:
  /// The size of every block: BumpArena's largest.
  static constexpr std::size_t kBlockBytes = std::size_t{4} << 20;

  /// Starts faulting in `count` blocks on a thread of its own. Where no thread can be started,
  /// or `count` is 0, does nothing. Never throws.
  explicit WarmBlocks(std::size_t count) noexcept;
  WarmBlocks(const WarmBlocks&) = delete;
  WarmBlocks& operator=(const WarmBlocks&) = delete;
  /// Stops the thread (after the block it is faulting in) and unmaps the blocks no one took.
  ~WarmBlocks();

  /// A block of kBlockBytes from any WarmBlocks alive, faulted in and zero, if one is ready;
  /// else an empty LargeBlock. Safe to call from any thread.
  [[nodiscard]] static LargeBlock take() noexcept;

  /// How many blocks the thread has faulted in so far (taken or not), and how many of them were
  /// taken (tests, benchmarks).
  [[nodiscard]] std::size_t made() const noexcept;
  [[nodiscard]] std::size_t taken() const noexcept;

 private:
  void make_blocks(const std::stop_token& stop, std::size_t count) noexcept;

  // Every WarmBlocks alive, and each one's ready blocks and counts, under one process-wide mutex
  // (warm_blocks.cpp): take() is called once per 4 MiB block, so it is never contended.
  std::vector<LargeBlock> ready_;
  std::size_t made_ = 0;
  std::size_t taken_ = 0;
  std::jthread thread_;
};

}  // namespace pthload::common
