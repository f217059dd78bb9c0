// Row-major chunks of a tensor's elements, views where the tensor is contiguous.
#include "elements.hpp"

#include <algorithm>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

namespace pthinspect {

void release_file_pages(std::span<const std::byte> bytes) noexcept {
  if (bytes.empty()) return;
  static const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  // Only whole pages inside the span: a neighbour's bytes on a shared page may still be in use.
  const auto begin = (reinterpret_cast<std::uintptr_t>(bytes.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(bytes.data()) + bytes.size()) / page * page;
  // MADV_DONTNEED on a read-only file mapping drops this process's page table entries; the data
  // stays in the page cache and is read again if touched. Never used on owned memory, where it
  // would zero the bytes.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::string unreadable_reason(const pthload::Tensor& tensor) {
  if (tensor.layout() != pthload::Layout::kStrided) {
    return std::string(pthload::layout_name(tensor.layout())) + " tensor";
  }
  if (tensor.wrapper_subclass() != nullptr) return "wrapper subclass without storage";
  if (!tensor.has_storage()) return "meta tensor (no data)";
  if (!tensor.storage().is_placed() || tensor.storage().device() != pthload::Device::cpu()) {
    return "storage not on the CPU";
  }
  return {};
}

ElementReader::ElementReader(const pthload::Tensor& tensor)
    : tensor_(tensor),
      element_size_(pthload::element_size(tensor.dtype())),
      contiguous_(tensor.is_contiguous() || tensor.numel() <= 1),
      file_view_(tensor.storage().is_file_view()) {
  const std::uint64_t packed = pthload::packed_per_byte(tensor.dtype());
  total_ = packed > 1 ? (tensor.numel() + packed - 1) / packed : tensor.nbytes();
  if (packed > 1) contiguous_ = true;
  if (!contiguous_) index_.assign(tensor.dim(), 0);
}

ElementReader::~ElementReader() {
  release_previous();
}

void ElementReader::release_previous() noexcept {
  if (file_view_) release_file_pages(previous_);
  previous_ = {};
}

std::span<const std::byte> ElementReader::next(std::size_t max_bytes) {
  release_previous();
  if (done_ >= total_) return {};
  const std::size_t unit = pthload::packed_per_byte(tensor_.dtype()) > 1 ? 1 : element_size_;
  const std::size_t want = static_cast<std::size_t>(
      std::min<std::uint64_t>(std::max(max_bytes / unit, std::size_t{1}) * unit, total_ - done_));
  if (contiguous_) {
    const std::span<const std::byte> chunk(tensor_.data() + done_, want);
    done_ += want;
    previous_ = chunk;
    return chunk;
  }
  // A strided view: walk the index row-major, copying runs along the last dimension.
  buffer_.resize(want);
  const auto sizes = tensor_.sizes();
  const auto strides = tensor_.strides();
  const std::size_t last = sizes.size() - 1;
  const std::byte* base = tensor_.data();
  std::size_t filled = 0;
  while (filled < want) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < sizes.size(); ++d)
      offset += index_[d] * strides[d];
    const auto run = static_cast<std::size_t>(std::min<std::int64_t>(
        sizes[last] - index_[last], static_cast<std::int64_t>((want - filled) / element_size_)));
    if (strides[last] == 1) {
      std::memcpy(buffer_.data() + filled, base + offset * element_size_, run * element_size_);
    } else {
      for (std::size_t i = 0; i < run; ++i) {
        std::memcpy(buffer_.data() + filled + i * element_size_,
                    base + (offset + static_cast<std::int64_t>(i) * strides[last]) * element_size_,
                    element_size_);
      }
    }
    filled += run * element_size_;
    index_[last] += static_cast<std::int64_t>(run);
    for (std::size_t d = last; d > 0 && index_[d] == sizes[d]; --d) {
      index_[d] = 0;
      ++index_[d - 1];
    }
  }
  done_ += want;
  if (done_ == total_ && file_view_) {
    // The view's pages are released once it is read through (its storage may be any size).
    const auto& storage = tensor_.storage();
    release_file_pages(storage.bytes());
  }
  return buffer_;
}

}  // namespace pthinspect
