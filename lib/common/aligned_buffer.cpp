// AlignedBuffer: aligned_alloc needs a size that is a multiple of the alignment. Large buffers
// are 2 MiB aligned and faulted in as huge pages by the thread that fills them
// (common::fault_in_huge_pages): filling a 1 GB storage then costs 512 page faults instead of
// 262 144, which is most of the time a copy into fresh memory takes where huge pages are cheap.
#include "common/aligned_buffer.hpp"

#include <cstdlib>
#include <new>

#include "common/fault_hooks.hpp"
#include "common/huge_pages.hpp"

namespace pthload::common {

AlignedBuffer::AlignedBuffer(std::size_t size, Filled filled) : size_(size) {
  const std::size_t alignment = size >= kHugePageBytes ? kHugePageBytes : kAlignment;
  // posix_memalign, unlike aligned_alloc, needs no size rounding: a huge-page aligned buffer does
  // not waste up to 2 MiB at its end. A zero-size buffer still gets memory, so data() is never
  // null for a live buffer.
  void* memory = nullptr;
  if (fault_hooks::allocation_fails(size) ||
      ::posix_memalign(&memory, alignment, size == 0 ? alignment : size) != 0) {
    throw std::bad_alloc();
  }
  storage_.reset(static_cast<std::byte*>(memory));
  if (alignment == kHugePageBytes && filled == Filled::kNow) {
    (void)fault_in_huge_pages(storage_.get(), size);
  }
}

}  // namespace pthload::common
