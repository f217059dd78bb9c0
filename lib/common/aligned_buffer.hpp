// An owned, 64-byte aligned, uninitialised byte buffer: inflated records and copied storages.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <span>

namespace pthload::common {

/// Owns `size` bytes aligned to kAlignment (to kLargeBlockBytes from that size on, as the memory
/// policy of common/fresh_memory.hpp wants them). Move-only; the bytes are not initialised.
class AlignedBuffer {
 public:
  static constexpr std::size_t kAlignment = 64;

  AlignedBuffer() = default;
  /// Allocates `size` bytes; throws std::bad_alloc when the system refuses.
  explicit AlignedBuffer(std::size_t size);

  [[nodiscard]] std::byte* data() noexcept { return storage_.get(); }
  [[nodiscard]] const std::byte* data() const noexcept { return storage_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::span<std::byte> span() noexcept { return {storage_.get(), size_}; }
  [[nodiscard]] std::span<const std::byte> span() const noexcept { return {storage_.get(), size_}; }

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> storage_;
  std::size_t size_ = 0;
};

}  // namespace pthload::common
