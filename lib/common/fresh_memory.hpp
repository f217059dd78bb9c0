// pthload's one memory policy: how it gets the fresh memory a load fills (value arenas, indexes,
// file images, copies of storages, staging), in one place, with one behaviour that depends on
// neither timing nor what ran before.
//
//   - Blocks of kLargeBlockBytes or more get an anonymous mapping of their own, 2 MiB aligned,
//     and are faulted in by whoever fills them, a base page (4 KiB on x86-64) at a time, or by
//     a thread ahead of the one that fills them (populate_for_filler).
//   - With PTHLOAD_HUGE_PAGES=1 in the environment (read once, at the first large block), such
//     blocks are advised MADV_HUGEPAGE: one page fault per 2 MiB instead of 512, where the
//     kernel honours the advice and huge pages are cheap (bare metal, most hosts). Off by
//     default: on virtual machines whose host takes back free memory (virtio-balloon free page
//     reporting), a huge page the host has discarded costs 5-30 ms to fault in, and a process
//     started once found no gain in them (docs/performance.md, "The memory policy").
//   - A range a thread is about to fill with pread (a copy of a storage, an image of part of a
//     file) is first written a byte per page by that thread (prepare_for_pread): the page faults
//     are then taken in user space, cheaper than inside pread's copy.
// Nothing else: no code outside this file advises, populates or times fresh memory. (Mappings
// of a file are another matter: the GPU pipeline asks the kernel to read ahead the ranges it
// copies, MADV_POPULATE_READ in lib/device/pipeline.cpp.)
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <new>
#include <span>

namespace pthload::common {

/// Blocks and arrays of at least this many bytes get a mapping of their own (2 MiB: one huge
/// page, where huge pages are asked for).
inline constexpr std::size_t kLargeBlockBytes = std::size_t{2} << 20;

/// Whether large blocks are advised MADV_HUGEPAGE: PTHLOAD_HUGE_PAGES is "1" (or "on", "yes",
/// "true"). Read once.
[[nodiscard]] bool huge_pages_requested() noexcept;

/// `size` bytes (at least kLargeBlockBytes) in an anonymous mapping of their own, aligned to
/// kLargeBlockBytes, zero-filled, faulted in as they are touched; advised as the policy says.
/// Unlike posix_memalign's, the alignment costs no address space once made: the mapping is
/// trimmed to the pages the block needs. Consults fault_hooks::allocation_fails. Throws
/// std::bad_alloc.
[[nodiscard]] std::byte* map_fresh(std::size_t size);
/// Releases what map_fresh(size) returned.
void unmap_fresh(std::byte* block, std::size_t size) noexcept;

/// Applies the policy to fresh memory this process got some other way (posix_memalign): the
/// whole 2 MiB blocks inside `range` are advised as map_fresh's are.
void advise_fresh(std::span<std::byte> range) noexcept;

/// For a range of fresh memory this thread is about to fill with pread, which no other thread
/// uses meanwhile: writes a zero to one byte of each of its base pages, so that the pages are
/// faulted in here, not inside pread's copy.
/// Measured on this project's machines: reading the 0.95 GB state dict into fresh memory on two
/// threads in 8 MiB pieces took 190 ms with the pages written first, 239 ms without (medians of
/// four). Contents stay zero for fresh memory; other memory must be about to be overwritten.
/// (Not MADV_POPULATE_WRITE, which holds the process's mmap lock while it works: another
/// thread's madvise or munmap then waits, and every page fault queues behind it.)
void prepare_for_pread(std::span<std::byte> range) noexcept;

/// For fresh memory (from map_fresh) that another thread is about to fill, and may be filling
/// already: faults in the pages of `range` for writing without writing them (MADV_POPULATE_WRITE,
/// Linux 5.14), so that the kernel's zeroing is paid by this thread, not by the filler. Contents
/// never change, so the filler may write the same pages meanwhile, and populating a page twice
/// costs a walk of its page table only. The range is widened to whole base pages, which must lie
/// in one mapping. False where the kernel cannot (nothing was done; asking again is useless).
/// (prepare_for_pread writes instead: cheaper, but only for a range no other thread touches.)
bool populate_for_filler(std::span<std::byte> range) noexcept;

/// The base page size (sysconf(_SC_PAGESIZE); 4 KiB if it cannot say). Read once.
[[nodiscard]] std::size_t page_bytes() noexcept;

/// A std allocator that gives arrays of at least kLargeBlockBytes a mapping of their own
/// (map_fresh) and smaller ones operator new's memory. Stateless.
template <typename T>
struct LargeArrayAllocator {
  using value_type = T;

  LargeArrayAllocator() noexcept = default;
  template <typename U>
  explicit(false) LargeArrayAllocator(const LargeArrayAllocator<U>& /*other*/) noexcept {}

  [[nodiscard]] T* allocate(std::size_t count) {
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      throw std::bad_array_new_length();
    }
    const std::size_t bytes = count * sizeof(T);
    if (bytes < kLargeBlockBytes) return std::allocator<T>{}.allocate(count);
    static_assert(alignof(T) <= kLargeBlockBytes);
    return static_cast<T*>(static_cast<void*>(map_fresh(bytes)));
  }
  void deallocate(T* array, std::size_t count) noexcept {
    const std::size_t bytes = count * sizeof(T);
    if (bytes < kLargeBlockBytes) {
      std::allocator<T>{}.deallocate(array, count);
    } else {
      unmap_fresh(static_cast<std::byte*>(static_cast<void*>(array)), bytes);
    }
  }

  friend bool operator==(const LargeArrayAllocator&, const LargeArrayAllocator&) noexcept {
    return true;
  }
};

/// Frees a block from LargeArrayAllocator<std::byte>: knows its size.
struct LargeBlockDeleter {
  std::size_t size = 0;
  void operator()(std::byte* block) const noexcept {
    LargeArrayAllocator<std::byte>{}.deallocate(block, size);
  }
};
/// An owned, uninitialised block of bytes: a mapping of its own from kLargeBlockBytes on.
using LargeBlock = std::unique_ptr<std::byte[], LargeBlockDeleter>;

/// A LargeBlock of `size` bytes (> 0). Throws std::bad_alloc.
[[nodiscard]] inline LargeBlock make_large_block(std::size_t size) {
  return LargeBlock(LargeArrayAllocator<std::byte>{}.allocate(size), LargeBlockDeleter{size});
}

}  // namespace pthload::common
