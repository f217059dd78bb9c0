#include "device/cpu/packed_copies.hpp"

#include <utility>

#include "common/aligned_buffer.hpp"
#include "common/fresh_memory.hpp"

namespace pthload::device::cpu {
namespace {

constexpr std::size_t piece_size(std::uint64_t nbytes) noexcept {
  return (static_cast<std::size_t>(nbytes) + PackedCopies::kPieceAlignment - 1) &
         ~(PackedCopies::kPieceAlignment - 1);
}

// One block of `size` bytes (a multiple of kPieceAlignment), owned by the shared pointer: from
// kLargeBlockBytes on, a mapping of its own (common/fresh_memory.hpp); below, an aligned heap
// buffer.
std::shared_ptr<std::byte> allocate_block(std::size_t size) {
  if (size >= common::kLargeBlockBytes) {
    std::byte* block = common::map_fresh(size);
    // shared_ptr frees the block with the deleter if its control block cannot be allocated.
    return {block, [size](std::byte* owned) { common::unmap_fresh(owned, size); }};
  }
  auto buffer = std::make_shared<common::AlignedBuffer>(size);
  std::byte* const data = buffer->data();
  return {std::move(buffer), data};
}

}  // namespace

void PackedCopies::expect(std::uint64_t nbytes) noexcept {
  if (is_packed(nbytes) && block_ == nullptr) expected_bytes_ += piece_size(nbytes);
}

std::span<std::byte> PackedCopies::take(std::uint64_t nbytes) {
  if (!is_packed(nbytes)) return {};
  const std::size_t size = piece_size(nbytes);
  if (block_ == nullptr && expected_bytes_ > 0) {
    block_ = allocate_block(expected_bytes_);
    cursor_ = block_.get();
    left_ = expected_bytes_;
  }
  if (size > left_) return {};
  std::byte* const piece = cursor_;
  cursor_ += size;
  left_ -= size;
  return {piece, static_cast<std::size_t>(nbytes)};
}

}  // namespace pthload::device::cpu
