// load_slice(): a range along a tensor's first or last dimension, read from the file and
// placed, leaving the rest of the tensor unread (tensor-parallel sharding; safetensors'
// get_slice reads the same bytes).
#include "device/select_slice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "common/check.hpp"
#include "device/backend.hpp"
#include "device/cpu/kernels.hpp"
#include "device/cpu/placement.hpp"
#include "device/device_check.hpp"
#include "device/pipeline.hpp"
#include "pthload/error.hpp"
#include "pthload/slice.hpp"

namespace pthload {
namespace {

// Which bytes of the source the slice is: `runs` runs of `run_bytes`, the first at `first`,
// each `step` after the one before.
struct Gather {
  std::uint64_t first = 0;
  std::uint64_t run_bytes = 0;
  std::uint64_t runs = 1;
  std::uint64_t step = 0;
  [[nodiscard]] std::uint64_t bytes() const noexcept { return run_bytes * runs; }
};

void check_sliceable(const Tensor& tensor, std::string_view name) {
  const char* why = nullptr;
  if (tensor.layout() != Layout::kStrided || !tensor.has_storage()) {
    why = "it has no storage of its own (sparse, nested, meta or a wrapper subclass)";
  } else if (tensor.quantization() != nullptr || packed_per_byte(tensor.dtype()) != 1) {
    why = "it is quantized";
  } else if (!tensor.is_contiguous()) {
    why = "it is a non-contiguous view (slice the tensor it views)";
  } else if (tensor.dim() == 0) {
    why = "it has no dimensions";
  }
  if (why != nullptr) {
    throw UnsupportedError(Errc::kSliceUnsupported,
                           fmt::format("cannot slice tensor '{}': {}", name, why));
  }
  const Device placed_on = tensor.storage().is_placed() ? tensor.storage().device() : Device::cpu();
  if (placed_on.type != Device::Type::kCpu) {
    throw UnsupportedError(
        Errc::kSliceUnsupported,
        fmt::format("cannot slice tensor '{}': its storage is placed on {}{}; "
                    "slice an open()ed checkpoint",
                    name, placed_on.to_string(),
                    placed_on.type == Device::Type::kMeta ? ", which holds no bytes" : ""));
  }
}

// `begin` and `end` are made non-negative first: a negative one counts from the end of the
// dimension, as Python's t[begin:end] and safetensors' get_slice read it.
Gather plan_gather(const Tensor& tensor, std::string_view name, int dim, std::int64_t& begin,
                   std::int64_t& end) {
  const auto sizes = tensor.sizes();
  const auto rank = static_cast<int>(sizes.size());
  const int axis = dim < 0 ? dim + rank : dim;
  if (axis != 0 && axis != rank - 1) {
    throw UnsupportedError(Errc::kSliceBadRange,
                           fmt::format("tensor '{}' ({} dimensions) is sliced along its first or "
                                       "last dimension, not {}",
                                       name, rank, dim));
  }
  const auto extent = sizes[static_cast<std::size_t>(axis)];
  const auto requested_begin = begin;
  const auto requested_end = end;
  if (begin < 0 && begin >= -extent) begin += extent;
  if (end < 0 && end >= -extent) end += extent;
  if (begin < 0 || begin > end || end > extent) {
    throw UnsupportedError(Errc::kSliceBadRange,
                           fmt::format("slice [{}, {}) of dimension {} of tensor '{}' is outside "
                                       "its size {}",
                                       requested_begin, requested_end, axis, name, extent));
  }
  // The tensor was checked against its storage when it was opened: these products fit.
  const std::uint64_t element = element_size(tensor.dtype());
  const std::uint64_t base = static_cast<std::uint64_t>(tensor.storage_offset()) * element;
  const auto count = static_cast<std::uint64_t>(end - begin);
  const auto product = [](auto from, auto to) {
    return std::accumulate(from, to, std::uint64_t{1}, [](std::uint64_t a, std::int64_t b) {
      return a * static_cast<std::uint64_t>(b);
    });
  };
  if (axis == 0) {
    const std::uint64_t row = product(sizes.begin() + 1, sizes.end()) * element;
    return {.first = base + static_cast<std::uint64_t>(begin) * row, .run_bytes = count * row};
  }
  const std::uint64_t rows = product(sizes.begin(), sizes.end() - 1);
  return {.first = base + static_cast<std::uint64_t>(begin) * element,
          .run_bytes = count * element,
          .runs = rows,
          .step = static_cast<std::uint64_t>(extent) * element};
}

// Copies the slice's runs of `source` into `out`. Bytes still in the file are read with pread
// through `file` (an io=read image may not hold them; a mapping may shrink under us), others
// (placed or inflated) copied from memory.
void gather_into(std::span<const std::byte> source, const Gather& gather, std::byte* out,
                 const common::MappedFile* file, std::string_view record) {
  if (gather.run_bytes == 0) return;
  const auto run_bytes = static_cast<std::size_t>(gather.run_bytes);
  for (std::uint64_t r = 0; r < gather.runs; ++r) {
    const auto run =
        source.subspan(static_cast<std::size_t>(gather.first + r * gather.step), run_bytes);
    std::byte* destination = out + r * gather.run_bytes;
    if (file != nullptr) {
      file->copy_out(run, {destination, run_bytes}, record);
    } else {
      std::copy(run.begin(), run.end(), destination);
    }
  }
}

}  // namespace

namespace device {

Tensor load_slice(const Checkpoint& checkpoint, std::string_view name, int dim, std::int64_t begin,
                  std::int64_t end, Device device, const CudaOptions& cuda,
                  const std::shared_ptr<Backend>& backend) {
  const auto& state = internal::Access::state(checkpoint);
  return common::with_context({.path = state.path}, [&] {
    const Tensor& tensor = checkpoint.tensor(name);
    check_sliceable(tensor, name);
    if (device == kSkipStorage) {
      throw UnsupportedError(Errc::kSliceBadRange,
                             "kSkipStorage is map_location's answer, not a device to slice onto");
    }
    device = device::checked_device(device,
                                    [&] { return fmt::format("load_slice of tensor '{}'", name); });
    const Gather gather = plan_gather(tensor, name, dim, begin, end);
    const auto& source_state = internal::Access::state(tensor.storage());

    // A storage already on the CPU is read there (in host byte order); otherwise the stored
    // bytes, a view of the file unless the record is deflated (then inflated whole: torch.save
    // never deflates storages).
    common::AlignedBuffer inflated;
    std::span<const std::byte> source;
    std::uint8_t swap_unit = 1;
    const common::MappedFile* file = nullptr;  // reads `source` when it is bytes of the file
    if (tensor.storage().is_placed()) {
      source = source_state.cpu_bytes;
    } else {
      source = device::stored_bytes(state, source_state, inflated);
      swap_unit = source_state.swap_unit;
      if (inflated.size() == 0) file = &device::storage_file(state, source_state);
    }
    const std::string_view record =
        source_state.record != nullptr ? std::string_view(source_state.record->name) : "";
    const std::uint64_t last_end =
        gather.runs == 0 ? 0 : gather.first + (gather.runs - 1) * gather.step + gather.run_bytes;
    if (gather.bytes() > 0 && last_end > source.size()) {
      throw FormatError(
          Errc::kTorchTensorOutOfBounds,
          fmt::format("tensor '{}' runs past its storage's {} bytes", name, source.size()));
    }

    internal::StorageState slice;
    slice.key = source_state.key;
    slice.location = source_state.location;
    slice.max_overlapping_view_bytes = source_state.max_overlapping_view_bytes;
    slice.dtype = tensor.dtype();
    slice.nbytes = gather.bytes();
    slice.numel = gather.bytes() / element_size(tensor.dtype());
    slice.swap_unit = swap_unit;
    switch (device.type) {
      case Device::Type::kCpu: {
        common::AlignedBuffer buffer(static_cast<std::size_t>(slice.nbytes));
        gather_into(source, gather, buffer.data(), file, record);
        if (swap_unit > 1) device::cpu::byteswap(buffer.span().first(slice.nbytes), swap_unit);
        slice.placement = std::move(buffer);
        slice.cpu_bytes =
            std::get<common::AlignedBuffer>(slice.placement).span().first(slice.nbytes);
        slice.swap_unit = 1;
        break;
      }
      case Device::Type::kMeta:
        slice.placement = internal::MetaPlacement{};
        break;
      case Device::Type::kCuda: {
        device::check_device_exists(slice, device, true, backend ? backend->device_count() : 0);
        if (device.index < 0 && backend) device.index = backend->current_device();
        // Rows are one run of the file: the pipeline reads it in place. Columns are gathered
        // into host memory first, then placed as one contiguous copy.
        common::AlignedBuffer gathered;
        std::span<const std::byte> bytes;
        if (gather.runs == 1) {
          bytes = source.subspan(static_cast<std::size_t>(gather.first),
                                 static_cast<std::size_t>(gather.run_bytes));
        } else {
          gathered = common::AlignedBuffer(static_cast<std::size_t>(slice.nbytes));
          gather_into(source, gather, gathered.data(), file, record);
          bytes = gathered.span().first(slice.nbytes);
        }
        const device::DeviceJob job{.storage = &slice,
                                    .device = device.index,
                                    .source = bytes,
                                    .file = {},
                                    .reader = gathered.size() == 0 ? file : nullptr,
                                    .swap_unit = swap_unit,
                                    .alignment = device::view_alignment(slice)};
        device::Progress progress(cuda.progress, slice.nbytes);
        auto placed = device::place_on_devices(backend, std::span(&job, 1), cuda, progress);
        slice.placement = std::move(placed.front());
        slice.swap_unit = 1;
        break;
      }
    }
    slice.device = device;

    std::vector<std::int64_t> sizes(tensor.sizes().begin(), tensor.sizes().end());
    const int axis = dim < 0 ? dim + static_cast<int>(sizes.size()) : dim;
    sizes[static_cast<std::size_t>(axis)] = end - begin;
    // torch's narrow(...).contiguous() of a slice without elements is the narrowed view itself
    // (is_contiguous() holds for any empty tensor), strides and all. Computing contiguous strides
    // for it instead could overflow: a file may give an empty tensor sizes like [0, 2^62, 2^62].
    // A slice with elements has every size at least 1 and fits its storage, so each stride,
    // at most its element count, fits too.
    std::vector<std::int64_t> strides(tensor.strides().begin(), tensor.strides().end());
    if (std::find(sizes.begin(), sizes.end(), 0) == sizes.end()) {
      strides.back() = 1;
      for (std::size_t i = sizes.size(); i-- > 1;)
        strides[i - 1] = strides[i] * sizes[i];
    }
    return internal::Access::make_tensor(internal::Access::make_storage(std::move(slice)),
                                         tensor.dtype(), sizes, strides, 0, tensor.requires_grad());
  });
}

}  // namespace device

Tensor load_slice(const Checkpoint& checkpoint, std::string_view name, int dim, std::int64_t begin,
                  std::int64_t end, Device device, const CudaOptions& cuda) {
  return device::load_slice(checkpoint, name, dim, begin, end, device, cuda,
                            device::cuda_backend());
}

}  // namespace pthload
