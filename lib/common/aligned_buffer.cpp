// AlignedBuffer: aligned_alloc needs a size that is a multiple of the alignment.
#include "common/aligned_buffer.hpp"

#include <new>

namespace pthload::common {

AlignedBuffer::AlignedBuffer(std::size_t size) : size_(size) {
  // Rounded up because std::aligned_alloc requires a multiple of the alignment; a zero-size
  // buffer still gets one block so data() is never null for a live buffer.
  const std::size_t rounded =
      size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < size) throw std::bad_alloc();
  void* memory = std::aligned_alloc(kAlignment, rounded);
  if (memory == nullptr) throw std::bad_alloc();
  storage_.reset(static_cast<std::byte*>(memory));
}

}  // namespace pthload::common
