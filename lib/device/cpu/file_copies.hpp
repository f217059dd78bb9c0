// Reading the owned copies of CPU storages from their files with several threads at once. A
// copy load is bound by the kernel's copy into fresh memory and what getting that memory costs,
// and both scale with cores: two threads read a 0.95 GB checkpoint into fresh buffers in 117 ms
// on a 2-core machine, one in 225 ms (a reused 1 MiB buffer: 155 ms).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/fresh_memory.hpp"
#include "common/mapped_file.hpp"
#include "device/pipeline.hpp"

namespace pthload::device::cpu {

/// One storage's bytes to read from its file into memory the storage already owns.
struct FileCopy {
  const common::MappedFile* file = nullptr;
  /// Bytes of `file` (within its bytes() or, for an io=map image, its view_bytes()).
  std::span<const std::byte> source;
  /// As many bytes, owned by the storage.
  std::span<std::byte> destination;
  /// The record, for the IoError of a read that fails.
  std::string_view record;
  /// The bytes of the record's own local header just before `source` (zip records), or
  /// kNoHeader: a copy is read together with the one before it only when nothing but its own
  /// header (and that one's data descriptor) lies between them, so no byte of a storage left
  /// out of the load is ever read.
  std::size_t header_bytes = kNoHeader;
  static constexpr std::size_t kNoHeader = SIZE_MAX;
};

/// The copies of one load: a copy load of 100 000 small storages lists 6 MB of them, in a
/// mapping of their own (common/fresh_memory.hpp).
using FileCopyList = std::vector<FileCopy, common::LargeArrayAllocator<FileCopy>>;

/// Copies below this total are read by the calling thread alone: starting threads costs more
/// than they save.
inline constexpr std::uint64_t kParallelCopyBytes = std::uint64_t{32} << 20;
/// The unit of work a thread takes: large enough that a pread's cost vanishes, small enough
/// that the threads finish together.
inline constexpr std::size_t kCopyChunkBytes = std::size_t{8} << 20;

/// The threads a copy of `total_bytes` uses when `requested` were asked for (0: min(8,
/// hardware threads)): 1 below kParallelCopyBytes, never more than there are chunks.
[[nodiscard]] unsigned copy_threads_for(std::uint64_t total_bytes, unsigned requested) noexcept;

/// Reads every copy through its file's copy_out (pread for files), `copies` being in file
/// order: a large copy in chunks of kCopyChunkBytes, small copies (under 1 MiB) of adjacent
/// records together, one read per MiB of file. With `threads` > 1 the units are
/// taken in order by that many threads (run_on_threads), else read by the calling thread; each
/// adds the bytes it filled to `progress`. The first error stops the others from taking more
/// units and is rethrown here once every thread has stopped; what the other threads read by then
/// is left as it is (the caller discards the storages).
void read_copies(std::span<const FileCopy> copies, unsigned threads, Progress& progress);

}  // namespace pthload::device::cpu
