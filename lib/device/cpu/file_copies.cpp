// read_copies: chunks handed out by an atomic counter; the first error is kept, the rest of the
// work abandoned.
#include "device/cpu/file_copies.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace pthload::device::cpu {
namespace {

struct Chunk {
  const FileCopy* copy;
  std::size_t offset;
  std::size_t size;
};

std::vector<Chunk> chunks_of(std::span<const FileCopy> copies) {
  std::vector<Chunk> chunks;
  for (const FileCopy& copy : copies) {
    for (std::size_t offset = 0; offset < copy.source.size(); offset += kCopyChunkBytes) {
      chunks.push_back({&copy, offset, std::min(kCopyChunkBytes, copy.source.size() - offset)});
    }
  }
  return chunks;
}

void read_chunk(const Chunk& chunk) {
  chunk.copy->file->copy_out(chunk.copy->source.subspan(chunk.offset, chunk.size),
                             chunk.copy->destination.subspan(chunk.offset, chunk.size),
                             chunk.copy->record);
}

}  // namespace

unsigned copy_threads_for(std::uint64_t total_bytes, unsigned requested) noexcept {
  if (total_bytes < kParallelCopyBytes) return 1;
  constexpr unsigned kDefaultMaxThreads = 8;
  const unsigned threads =
      requested != 0
          ? requested
          : std::min(kDefaultMaxThreads, std::max(1u, std::thread::hardware_concurrency()));
  const std::uint64_t chunks = (total_bytes + kCopyChunkBytes - 1) / kCopyChunkBytes;
  return static_cast<unsigned>(std::min<std::uint64_t>(threads, chunks));
}

void read_copies(std::span<const FileCopy> copies, unsigned threads, Progress& progress) {
  if (threads <= 1) {
    for (const FileCopy& copy : copies) {
      if (copy.source.empty()) continue;
      copy.file->copy_out(copy.source, copy.destination, copy.record);
      progress.add(copy.source.size());
    }
    return;
  }
  const std::vector<Chunk> chunks = chunks_of(copies);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const auto work = [&]() noexcept {
    for (std::size_t i; !failed.load(std::memory_order_relaxed) &&
                        (i = next.fetch_add(1, std::memory_order_relaxed)) < chunks.size();) {
      try {
        read_chunk(chunks[i]);
        progress.add(chunks[i].size);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    helpers.reserve(threads - 1);
    try {
      for (unsigned t = 1; t < threads; ++t)
        helpers.emplace_back(work);
    } catch (const std::system_error&) {
      // No thread to be had (a process at its limit): the ones started and this one do it all.
    }
    work();
  }  // the helpers join here
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace pthload::device::cpu
