// AlignedBuffer: aligned_alloc needs a size that is a multiple of the alignment; posix_memalign
// does not. Large buffers take the memory policy's alignment and advice (common/fresh_memory.hpp).
#include "common/aligned_buffer.hpp"

#include <cstdlib>
#include <new>

#include "common/fault_hooks.hpp"
#include "common/fresh_memory.hpp"

namespace pthload::common {

AlignedBuffer::AlignedBuffer(std::size_t size) : size_(size) {
  const std::size_t alignment = size >= kLargeBlockBytes ? kLargeBlockBytes : kAlignment;
  // A large buffer does not waste up to 2 MiB at its end, as aligned_alloc's rounding would. A
  // zero-size buffer still gets memory, so data() is never null for a live buffer.
  void* memory = nullptr;
  if (fault_hooks::allocation_fails(size) ||
      ::posix_memalign(&memory, alignment, size == 0 ? alignment : size) != 0) {
    throw std::bad_alloc();
  }
  storage_.reset(static_cast<std::byte*>(memory));
  if (alignment == kLargeBlockBytes) advise_fresh({storage_.get(), size});
}

}  // namespace pthload::common
