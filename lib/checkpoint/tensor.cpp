// Storage and Tensor: accessors over the state the torch and device layers fill in.
#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "checkpoint/access.hpp"
#include "checkpoint/byte_holds.hpp"
#include "checkpoint/content_checksum.hpp"
#include "checkpoint/state.hpp"
#include "common/assert.hpp"
#include "common/checked.hpp"
#include "common/content_hash.hpp"
#include "pthload/error.hpp"
#include "pthload/tensor.hpp"

namespace pthload {

Storage::Storage(internal::StorageState& state) noexcept : state_(&state) {}
Storage::~Storage() = default;

std::string_view Storage::key() const noexcept {
  return state_->key;
}
std::string_view Storage::location() const noexcept {
  return state_->location;
}
Dtype Storage::dtype() const noexcept {
  return state_->dtype;
}
std::uint64_t Storage::nbytes() const noexcept {
  return state_->nbytes;
}
bool Storage::is_placed() const noexcept {
  return !std::holds_alternative<std::monostate>(state_->placement);
}
Device Storage::device() const noexcept {
  return state_->device;
}
bool Storage::is_file_view() const noexcept {
  return std::holds_alternative<internal::FileView>(state_->placement);
}
bool Storage::is_in_pickle() const noexcept {
  return state_->in_pickle;
}

std::span<const std::byte> Storage::bytes() const {
  const bool on_cpu = std::holds_alternative<internal::FileView>(state_->placement) ||
                      std::holds_alternative<common::AlignedBuffer>(state_->placement) ||
                      std::holds_alternative<internal::PackedCopy>(state_->placement);
  if (!on_cpu) {
    throw DeviceError(Errc::kDeviceNotOnCpu,
                      fmt::format("storage '{}' is {}, not on the CPU", state_->key,
                                  is_placed() ? "on " + state_->device.to_string()
                                              : std::string("not loaded (open() reads no data)")));
  }
  return state_->cpu_bytes;
}

void Storage::read(std::uint64_t offset, std::span<std::byte> destination) const {
  const auto all = bytes();
  if (offset > all.size() || destination.size() > all.size() - offset) {
    throw FormatError(Errc::kTorchTensorOutOfBounds,
                      fmt::format("storage '{}': bytes [{}, {}) asked of {}", state_->key, offset,
                                  offset + destination.size(), all.size()));
  }
  const auto range = all.subspan(static_cast<std::size_t>(offset), destination.size());
  if (const auto* view = std::get_if<internal::FileView>(&state_->placement)) {
    view->file->copy_out(range, destination, view->record);
  } else if (!range.empty()) {
    std::memcpy(destination.data(), range.data(), range.size());
  }
}

const void* Storage::device_pointer() const noexcept {
  if (const auto* memory =
          std::get_if<std::unique_ptr<internal::DeviceMemory>>(&state_->placement)) {
    return (*memory)->pointer();
  }
  return nullptr;
}

Tensor::Dims::Dims(std::span<const std::int64_t> sizes, std::span<const std::int64_t> strides)
    : count(sizes.size() + strides.size()) {
  std::int64_t* out = inline_values;
  if (count > kInline) {
    heap = std::make_unique<std::int64_t[]>(count);
    out = heap.get();
  }
  std::copy(sizes.begin(), sizes.end(), out);
  std::copy(strides.begin(), strides.end(), out + sizes.size());
}
Tensor::Dims::Dims(const Dims& other) : Dims(other.all(), {}) {}
Tensor::Dims::Dims(Dims&& other) noexcept : heap(std::move(other.heap)), count(other.count) {
  std::copy(std::begin(other.inline_values), std::end(other.inline_values), inline_values);
  other.count = 0;
}
Tensor::Dims& Tensor::Dims::operator=(const Dims& other) {
  if (this != &other) *this = Dims(other);
  return *this;
}
Tensor::Dims& Tensor::Dims::operator=(Dims&& other) noexcept {
  if (this != &other) {
    heap = std::move(other.heap);
    count = other.count;
    std::copy(std::begin(other.inline_values), std::end(other.inline_values), inline_values);
    other.count = 0;
  }
  return *this;
}
Tensor::Dims::~Dims() = default;

Tensor::Tensor(const Tensor& other) = default;
Tensor::Tensor(Tensor&& other) noexcept = default;
Tensor& Tensor::operator=(const Tensor& other) = default;
Tensor& Tensor::operator=(Tensor&& other) noexcept = default;
Tensor::~Tensor() = default;

Tensor::Tensor(std::shared_ptr<const Storage> storage, Dtype dtype,
               std::span<const std::int64_t> sizes, std::span<const std::int64_t> strides,
               std::int64_t storage_offset, bool requires_grad)
    : storage_(std::move(storage)),
      dims_(sizes, strides),
      storage_offset_(storage_offset),
      dtype_(dtype),
      requires_grad_(requires_grad) {
  PTHLOAD_ASSERT(sizes.size() == strides.size());
}

Tensor::Tensor(Layout layout, Dtype dtype, std::span<const std::int64_t> sizes,
               std::span<const std::int64_t> strides, bool requires_grad, std::vector<Tensor> parts)
    : dims_(sizes, strides),
      storage_offset_(0),
      dtype_(dtype),
      requires_grad_(requires_grad),
      layout_(layout) {
  PTHLOAD_ASSERT(sizes.size() == strides.size());
  if (!parts.empty()) extras_ = std::make_shared<const Extras>(Extras{.parts = std::move(parts)});
}

std::span<const Tensor> Tensor::parts() const noexcept {
  return extras_ ? std::span<const Tensor>(extras_->parts) : std::span<const Tensor>();
}
const WrapperSubclass* Tensor::wrapper_subclass() const noexcept {
  return extras_ ? extras_->wrapper_subclass.get() : nullptr;
}
const Quantization* Tensor::quantization() const noexcept {
  return extras_ ? extras_->quantization.get() : nullptr;
}

Device Tensor::device() const noexcept {
  if (storage_) return storage_->device();
  if (const WrapperSubclass* wrapper = wrapper_subclass()) {
    return wrapper->device.value_or(Device::meta());
  }
  // A sparse tensor is where its values are (the last part), a nested one where its components
  // are; a storage-less dense one is meta.
  if (const auto tensor_parts = parts(); !tensor_parts.empty()) {
    return tensor_parts.back().device();
  }
  return Device::meta();
}

std::string_view layout_name(Layout layout) noexcept {
  switch (layout) {
    case Layout::kStrided:
      return "strided";
    case Layout::kSparseCoo:
      return "sparse_coo";
    case Layout::kSparseCsr:
      return "sparse_csr";
    case Layout::kSparseCsc:
      return "sparse_csc";
    case Layout::kSparseBsr:
      return "sparse_bsr";
    case Layout::kSparseBsc:
      return "sparse_bsc";
    case Layout::kNested:
      return "nested";
  }
  return "unknown";
}

std::span<const std::string_view> sparse_part_names(Layout layout) noexcept {
  static constexpr std::string_view kCoo[] = {"indices", "values"};
  static constexpr std::string_view kRowCompressed[] = {"crow_indices", "col_indices", "values"};
  static constexpr std::string_view kColumnCompressed[] = {"ccol_indices", "row_indices", "values"};
  switch (layout) {
    case Layout::kSparseCoo:
      return kCoo;
    case Layout::kSparseCsr:
    case Layout::kSparseBsr:
      return kRowCompressed;
    case Layout::kSparseCsc:
    case Layout::kSparseBsc:
      return kColumnCompressed;
    case Layout::kStrided:
    case Layout::kNested:
      break;
  }
  return {};
}

std::string_view qscheme_name(QScheme scheme) noexcept {
  switch (scheme) {
    case QScheme::kPerTensorAffine:
      return "per_tensor_affine";
    case QScheme::kPerChannelAffine:
      return "per_channel_affine";
    case QScheme::kPerChannelAffineFloatQParams:
      return "per_channel_affine_float_qparams";
  }
  return "unknown";
}

std::uint64_t Tensor::numel() const noexcept {
  // The torch layer checked that the tensor fits its storage, so the product cannot overflow
  // unless a size is zero, which ends the product early.
  std::uint64_t n = 1;
  for (const std::int64_t size : sizes()) {
    if (size == 0) return 0;
    n *= static_cast<std::uint64_t>(size);
  }
  return n;
}

std::uint64_t Tensor::nbytes() const noexcept {
  return numel() * element_size(dtype_);
}

bool Tensor::is_contiguous() const noexcept {
  // An empty tensor is contiguous whatever its strides, as in torch; asked first, because the
  // product of its other sizes need not fit in 64 bits (a file may claim (0, 2^40, 2^40)).
  if (std::find(sizes().begin(), sizes().end(), 0) != sizes().end()) return true;
  // Unsigned and saturating: numel fits in 64 bits unsigned but may pass INT64_MAX, and a
  // saturated product matches no stride (an int64), as no stride can match an overflowed one.
  std::uint64_t expected = 1;
  for (std::size_t i = sizes().size(); i-- > 0;) {
    if (sizes()[i] == 1) continue;  // torch ignores the stride of a size-1 dimension
    if (strides()[i] < 0 || static_cast<std::uint64_t>(strides()[i]) != expected) return false;
    expected = common::checked_mul(expected, static_cast<std::uint64_t>(sizes()[i]))
                   .value_or(std::numeric_limits<std::uint64_t>::max());
  }
  return true;
}

std::shared_ptr<const void> Tensor::hold_bytes() const {
  if (!storage_) return nullptr;
  return internal::hold_placement(storage_);
}

const std::byte* Tensor::data() const {
  if (!storage_) {
    throw UnsupportedError(
        Errc::kTorchTensorWithoutData,
        fmt::format("a {} tensor has no data of its own{}", layout_name(layout_),
                    wrapper_subclass() != nullptr ? " (a wrapper subclass keeps no storage)"
                    : layout_ == Layout::kStrided ? " (it is on the meta device)"
                                                  : ": its parts (Tensor::parts()) hold it"));
  }
  return storage_->bytes().data() +
         static_cast<std::size_t>(storage_offset_) * element_size(dtype_);
}

namespace {

// Calls `run(pointer, bytes)` for each maximal contiguous run of the tensor's elements, in
// row-major order: the innermost dimensions whose strides are the row-major ones are merged.
template <typename F>
void for_each_run(const std::byte* base, std::size_t item, std::span<const std::int64_t> sizes,
                  std::span<const std::int64_t> strides, std::uint64_t count, F&& run) {
  std::size_t inner = sizes.size();
  std::int64_t run_elements = 1;
  while (inner > 0 && (sizes[inner - 1] == 1 || strides[inner - 1] == run_elements)) {
    run_elements *= sizes[inner - 1];
    --inner;
  }
  const std::size_t run_bytes = static_cast<std::size_t>(run_elements) * item;
  std::vector<std::int64_t> index(inner, 0);
  std::int64_t offset = 0;
  for (std::uint64_t done = 0; done < count; done += static_cast<std::uint64_t>(run_elements)) {
    run(base + static_cast<std::size_t>(offset) * item, run_bytes);
    // Odometer over the outer dimensions: the innermost moves fastest.
    for (std::size_t d = inner; d-- > 0;) {
      if (++index[d] < sizes[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (sizes[d] - 1);
      index[d] = 0;
    }
  }
}

}  // namespace

// A view that shows more bytes than its storage holds must overlap itself (stride 0: expand,
// broadcast). torch saves such views and they are legal, but a file of a few hundred bytes can
// claim 2^40 elements over 4 bytes: reading them all would hang a checksum and a contiguous copy
// would allocate terabytes the file never paid for. Up to Limits::max_overlapping_view_bytes is
// still read (an expanded mask of a few hundred MB is real); past it the view is refused.
void check_shown_bytes(const Tensor& tensor, std::string_view what) {
  const std::uint64_t shown = tensor.nbytes();
  const std::uint64_t held = tensor.has_storage() ? tensor.storage().nbytes() : 0;
  const std::uint64_t limit =
      tensor.has_storage() ? internal::Access::state(tensor.storage()).max_overlapping_view_bytes
                           : Limits{}.max_overlapping_view_bytes;
  if (shown > held && shown > limit) {
    ErrorContext where;
    // Not StorageState::record: the tensor may have outlived its checkpoint and the archive.
    if (tensor.has_storage()) {
      if (const auto* view = std::get_if<internal::FileView>(
              &internal::Access::state(tensor.storage()).placement)) {
        where.record = view->record;
      }
    }
    throw FormatError(Errc::kTorchLimitExceeded,
                      fmt::format("{}: the view shows {} bytes over a storage of {} bytes (it "
                                  "overlaps itself: a stride-0 or expanded view); more than {} "
                                  "bytes of such a view are not read",
                                  what, shown, held, limit),
                      std::move(where));
  }
}

// quint4x2 and quint2x4 tensors are whole and contiguous (the torch layer checks): their bytes
// are the first ceil(numel / per_byte) of the storage, as torch's int_repr() gives them.
std::span<const std::byte> Tensor::packed_bytes() const {
  return {data(), static_cast<std::size_t>(packed_nbytes(dtype_, numel()))};
}

namespace {

// Whether the library's own reads of the tensor go through Storage::read (pread), not bytes().
bool is_file_view(const Tensor& tensor) noexcept {
  return tensor.has_storage() && tensor.storage().is_file_view();
}

std::uint64_t first_byte(const Tensor& tensor) noexcept {
  return static_cast<std::uint64_t>(tensor.storage_offset()) * element_size(tensor.dtype());
}

// Bytes from the first element to the end of the last (the tensor is not empty): what a strided
// view reaches in its storage. The torch layer checked that it lies inside the storage.
std::size_t spanned_bytes(const Tensor& tensor) noexcept {
  std::uint64_t last = 0;
  for (std::size_t d = 0; d < tensor.sizes().size(); ++d) {
    last += static_cast<std::uint64_t>(tensor.sizes()[d] - 1) *
            static_cast<std::uint64_t>(tensor.strides()[d]);
  }
  return static_cast<std::size_t>((last + 1) * element_size(tensor.dtype()));
}

// The bytes contiguous_bytes() gives: the elements', or a packed dtype's packed bytes.
std::uint64_t contiguous_size(const Tensor& tensor) noexcept {
  return packed_per_byte(tensor.dtype()) > 1 ? packed_nbytes(tensor.dtype(), tensor.numel())
                                             : tensor.nbytes();
}

// Calls `consume(pointer, bytes)` over the tensor's elements in row-major order. The library's
// own reads of a view of the file (checksums, contiguous copies) go through pread rather than the
// mapping, so a file truncated since the load gives IoError, not SIGBUS: a contiguous tensor a
// chunk at a time through `window` (grown to at most kChunkBytes, kept for the caller's next
// tensor), a strided view through one copy of the bytes it spans.
template <typename Consume>
void read_elements(const Tensor& tensor, common::AlignedBuffer& window, Consume&& consume) {
  const std::size_t item = element_size(tensor.dtype());
  const std::uint64_t count = tensor.numel();
  if (!is_file_view(tensor)) {
    for_each_run(tensor.data(), item, tensor.sizes(), tensor.strides(), count, consume);
    return;
  }
  if (tensor.is_contiguous()) {
    // 1 MiB: reads of that size run at the page cache's copy speed here, and the chunk is still
    // in cache when it is hashed. A fresh 4 MiB chunk for each tensor cost more in fresh
    // memory than the reads themselves (lib/torch/content_checksum.hpp).
    constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
    const auto total = static_cast<std::size_t>(count * item);
    if (window.size() < std::min(total, kChunkBytes)) {
      window = common::AlignedBuffer(std::min(total, kChunkBytes));
    }
    for (std::size_t done = 0; done < total;) {
      const std::size_t n = std::min(window.size(), total - done);
      tensor.storage().read(first_byte(tensor) + done, window.span().first(n));
      consume(window.data(), n);
      done += n;
    }
    return;
  }
  const std::size_t spanned = spanned_bytes(tensor);
  common::AlignedBuffer copy(spanned);
  tensor.storage().read(first_byte(tensor), copy.span().first(spanned));
  for_each_run(copy.data(), item, tensor.sizes(), tensor.strides(), count, consume);
}

// The packed bytes of a quint4x2/quint2x4 tensor, read with pread when they are a view of the file.
std::span<const std::byte> readable_packed(const Tensor& tensor, std::span<const std::byte> packed,
                                           common::AlignedBuffer& copy) {
  if (!is_file_view(tensor) || packed.empty()) return packed;
  copy = common::AlignedBuffer(packed.size());
  tensor.storage().read(first_byte(tensor), copy.span().first(packed.size()));
  return copy.span().first(packed.size());
}

}  // namespace

std::vector<std::byte> Tensor::contiguous_bytes() const {
  // Refused before anything is allocated: a view that overlaps itself may claim terabytes, and
  // a tensor without bytes on the CPU (data() says why) any number.
  if (packed_per_byte(dtype_) == 1) check_shown_bytes(*this, "contiguous_bytes");
  if (contiguous_size(*this) != 0) (void)data();
  std::vector<std::byte> out(static_cast<std::size_t>(contiguous_size(*this)));
  (void)copy_to(out);
  return out;
}

std::uint64_t Tensor::copy_to(std::span<std::byte> destination) const {
  const bool packed = packed_per_byte(dtype_) > 1;
  if (!packed) check_shown_bytes(*this, "copy_to");
  const std::uint64_t size = contiguous_size(*this);
  if (destination.size() < size) {
    throw FormatError(Errc::kTorchTensorOutOfBounds,
                      fmt::format("copy_to: the tensor's elements take {} bytes; the destination "
                                  "holds {}",
                                  size, destination.size()));
  }
  if (size == 0) return 0;
  const auto out = destination.first(static_cast<std::size_t>(size));
  if (is_file_view(*this) && (packed || is_contiguous())) {
    // Its bytes are one range of the storage: read straight into the caller's memory.
    storage().read(first_byte(*this), out);
    return size;
  }
  if (packed) {
    const auto bytes = packed_bytes();
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return size;
  }
  std::byte* cursor = out.data();
  common::AlignedBuffer window;
  read_elements(*this, window, [&](const std::byte* run, std::size_t n) {
    std::memcpy(cursor, run, n);
    cursor += n;
  });
  return size;
}

std::uint64_t Tensor::content_checksum() const {
  if (numel() != 0 && packed_per_byte(dtype_) > 1) {
    common::AlignedBuffer copy;
    return common::ContentHash::of(readable_packed(*this, packed_bytes(), copy));
  }
  common::AlignedBuffer window;
  return internal::content_checksum(*this, window);
}

std::uint64_t internal::content_checksum(const Tensor& tensor, common::AlignedBuffer& window) {
  if (tensor.numel() == 0) return common::ContentHash::of({});
  // The packed bytes are Tensor's own (rare: quint4x2, quint2x4).
  if (packed_per_byte(tensor.dtype()) > 1) return tensor.content_checksum();
  check_shown_bytes(tensor, "content_checksum");
  common::ContentHash hash;
  read_elements(tensor, window, [&](const std::byte* run, std::size_t n) {
    hash.update({run, n});
  });
  return hash.digest();
}

}  // namespace pthload
