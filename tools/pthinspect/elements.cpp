// Row-major chunks of a tensor's elements: read with pread from a file, views of owned memory;
// the checksums of many tensors, naming the one whose read fails.
#include "elements.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include <memory>

#include <fmt/format.h>

namespace pthinspect {

namespace {

// The tensor's Tensor::content_checksum(); an error names the tensor, and `path` where it names
// no file.
std::uint64_t checksum_naming(const pthload::Tensor& tensor, std::string_view name,
                              const std::string& path) {
  try {
    return tensor.content_checksum();
  } catch (const pthload::Error& e) {
    auto context = e.context();
    if (context.path.empty()) context.path = path;
    throw pthload::FormatError(e.code(), fmt::format("tensor '{}': {}", name, e.message()),
                               std::move(context));
  }
}

}  // namespace

std::vector<std::uint64_t> content_checksums_naming(std::span<const pthload::Tensor* const> tensors,
                                                    std::span<const std::string_view> names,
                                                    const std::string& path) {
  try {
    return pthload::content_checksums(tensors);
  } catch (const pthload::Error&) {
    for (std::size_t i = 0; i < tensors.size(); ++i)
      (void)checksum_naming(*tensors[i], names[i], path);
    // Each read succeeded when asked alone (an error that passed): the first error stands.
    throw;
  }
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

ElementReader::ElementReader(const pthload::Tensor& tensor, std::string_view name)
    : tensor_(tensor),
      element_size_(pthload::element_size(tensor.dtype())),
      contiguous_(tensor.is_contiguous() || tensor.numel() <= 1),
      file_view_(tensor.storage().is_file_view()) {
  const std::uint64_t packed = pthload::packed_per_byte(tensor.dtype());
  total_ = packed > 1 ? pthload::packed_nbytes(tensor.dtype(), tensor.numel()) : tensor.nbytes();
  if (packed > 1) contiguous_ = true;
  // Showing more bytes than the storage holds means the view overlaps itself.
  constexpr std::uint64_t max_overlapping_view_bytes = pthload::Limits{}.max_overlapping_view_bytes;
  if (total_ > tensor.storage().nbytes() && total_ > max_overlapping_view_bytes) {
    throw pthload::FormatError(
        pthload::Errc::kTorchLimitExceeded,
        fmt::format("tensor '{}' is a view that overlaps itself and shows {} bytes of a {}-byte "
                    "storage; more than {} bytes of such a view are not read",
                    name, total_, tensor.storage().nbytes(), max_overlapping_view_bytes));
  }
  if (!contiguous_) index_.assign(tensor.dim(), 0);
  if (file_view_ && !contiguous_ && total_ > 0) {
    // A strided view of the file is walked in one copy of the bytes it spans, read with pread
    // like the contiguous chunks below (never more than its storage: the file paid for it).
    std::uint64_t last = 0;
    for (std::size_t d = 0; d < tensor.sizes().size(); ++d) {
      last += static_cast<std::uint64_t>(tensor.sizes()[d] - 1) *
              static_cast<std::uint64_t>(tensor.strides()[d]);
    }
    spanned_.resize(static_cast<std::size_t>((last + 1) * element_size_));
    tensor.storage().read(first_byte(), spanned_);
  }
}

std::uint64_t ElementReader::first_byte() const noexcept {
  return static_cast<std::uint64_t>(tensor_.storage_offset()) * element_size_;
}

ElementReader::~ElementReader() = default;

std::span<const std::byte> ElementReader::next(std::size_t max_bytes) {
  if (done_ >= total_) return {};
  const std::size_t unit = pthload::packed_per_byte(tensor_.dtype()) > 1 ? 1 : element_size_;
  const std::size_t want = static_cast<std::size_t>(
      std::min<std::uint64_t>(std::max(max_bytes / unit, std::size_t{1}) * unit, total_ - done_));
  if (contiguous_ && file_view_) {
    // Read with pread into one reused buffer, not viewed in the mapping: a file truncated
    // since the load gives IoError instead of SIGBUS, and what was read costs no resident
    // pages of the mapping afterwards.
    buffer_.resize(want);
    tensor_.storage().read(first_byte() + done_, buffer_);
    done_ += want;
    return {buffer_.data(), want};
  }
  if (contiguous_) {
    const std::span<const std::byte> chunk(tensor_.data() + done_, want);
    done_ += want;
    return chunk;
  }
  return next_box(want / element_size_);
}

// A strided view is read one box of its index space at a time: the trailing dimensions that fit
// whole, and a range of the one before. Inside the box the loops run in the storage's order
// (largest stride outermost), so the storage is read front to back whatever the view's order:
// a transposed matrix row by row, not a page in every row per output row (the memory a box is
// gathered from is a storage in memory or a strided file view's pread copy).
std::span<const std::byte> ElementReader::next_box(std::uint64_t elements_wanted) {
  const auto sizes = tensor_.sizes();
  const auto strides = tensor_.strides();
  const std::size_t n = sizes.size();
  std::size_t first = n;  // dims [first, n) are whole in the box
  std::uint64_t inner = 1;
  while (first > 0 && inner * static_cast<std::uint64_t>(sizes[first - 1]) <= elements_wanted) {
    inner *= static_cast<std::uint64_t>(sizes[first - 1]);
    --first;
  }
  // Once reading has started, the outermost dim is ranged (the box continues where it was).
  if (first == 0 && done_ > 0) {
    first = 1;
    inner /= static_cast<std::uint64_t>(sizes[0]);
  }
  // The box's dims and sizes: a range of dim first-1 (when there is one), then dims [first, n).
  const std::size_t ranged = first > 0 ? first - 1 : 0;
  std::vector<std::int64_t> box(n, 1);
  for (std::size_t dim = first; dim < n; ++dim)
    box[dim] = sizes[dim];
  if (first > 0) {
    box[ranged] = std::min<std::int64_t>(static_cast<std::int64_t>(elements_wanted / inner),
                                         sizes[ranged] - index_[ranged]);
  }
  std::vector<std::int64_t> out_stride(n, 0);
  std::int64_t box_elements = 1;
  for (std::size_t dim = n; dim-- > ranged;) {
    out_stride[dim] = box_elements;
    box_elements *= box[dim];
  }
  std::int64_t base = 0;
  for (std::size_t dim = 0; dim < n; ++dim)
    base += index_[dim] * strides[dim];
  // Loop order: largest stride outermost; the innermost dim copies a run when it is contiguous
  // both in the storage and in the box.
  std::vector<std::size_t> order;
  for (std::size_t dim = ranged; dim < n; ++dim)
    if (box[dim] > 1) order.push_back(dim);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return strides[a] > strides[b]; });
  std::int64_t run = 1;
  if (!order.empty() && strides[order.back()] == 1 && out_stride[order.back()] == 1) {
    run = box[order.back()];
    order.pop_back();
  }

  const std::size_t bytes = static_cast<std::size_t>(box_elements) * element_size_;
  buffer_.resize(bytes);
  // A view of the file walks its pread copy, which starts at the tensor's first element.
  const std::byte* data = file_view_ ? spanned_.data() : tensor_.data();
  std::vector<std::int64_t> position(order.size(), 0);
  std::int64_t in = base;
  std::int64_t out = 0;
  for (std::int64_t copied = 0; copied < box_elements; copied += run) {
    std::memcpy(buffer_.data() + out * static_cast<std::int64_t>(element_size_),
                data + in * static_cast<std::int64_t>(element_size_),
                static_cast<std::size_t>(run) * element_size_);
    for (std::size_t j = order.size(); j-- > 0;) {
      const std::size_t dim = order[j];
      in += strides[dim];
      out += out_stride[dim];
      if (++position[j] < box[dim]) break;
      in -= strides[dim] * box[dim];
      out -= out_stride[dim] * box[dim];
      position[j] = 0;
    }
  }
  // Past the box: the ranged dim moves on, carrying into the dims before it.
  if (first == 0) {
    done_ = total_;
  } else {
    index_[ranged] += box[ranged];
    for (std::size_t dim = ranged; dim > 0 && index_[dim] == sizes[dim]; --dim) {
      index_[dim] = 0;
      ++index_[dim - 1];
    }
    done_ += bytes;
  }
  return {buffer_.data(), bytes};
}

}  // namespace pthinspect
