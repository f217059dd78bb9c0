// _rebuild_nested_tensor(buffer, sizes, strides, storage_offsets): a nested tensor of the strided
// layout (torch.nested.nested_tensor), whose components are views of one buffer (torch/_utils.py;
// torch/csrc/autograd/python_nested_functions: _nested_view_from_buffer; docs/format.md §3).
//
// A nested Tensor has no storage: its components follow it in Checkpoint::tensors() as
// `<name>.0`, `<name>.1`..., ordinary strided tensors over the buffer's storage. Their geometry is
// tensor *data* (the sizes, strides and offsets tensors), so open() reads those three small
// records: every value is checked, and an error names the record and the byte offset of the bad
// value.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "checkpoint/access.hpp"
#include "common/assert.hpp"
#include "common/byte_reader.hpp"
#include "common/check.hpp"
#include "pthload/error.hpp"
#include "torch/rebuild.hpp"
#include "torch/rebuild_args.hpp"

namespace pthload::torch {
namespace {

using pickle::Value;

// The int64 values of a contiguous tensor, with where the first one lies (a record of the
// archive, or an offset of a legacy stream's file) for error messages.
struct Int64Values {
  std::vector<std::int64_t> values;
  std::string record;
  std::uint64_t first_offset = 0;

  [[noreturn]] void bad(std::size_t index, std::string_view what) const {
    throw FormatError(Errc::kTorchBadNestedTensor, fmt::format("_rebuild_nested_tensor: {}", what),
                      {.record = record, .offset = first_offset + index * 8});
  }
};

Int64Values read_int64_values(const internal::CheckpointState& checkpoint, const Tensor& tensor,
                              std::string_view what) {
  // Contiguous, so there are no more values than bytes in the storage: a hostile stride 0 cannot
  // turn one element into a billion components.
  if (tensor.dtype() != Dtype::kInt64 || !tensor.is_contiguous()) {
    throw FormatError(
        Errc::kTorchBadNestedTensor,
        fmt::format("_rebuild_nested_tensor: {} is not a contiguous int64 tensor", what));
  }
  const auto& storage = internal::Access::state(tensor.storage());
  const std::uint64_t start = static_cast<std::uint64_t>(tensor.storage_offset()) * 8;
  const std::uint64_t size = tensor.numel() * 8;  // inside the storage: checked at its rebuild
  Int64Values result;
  std::span<const std::byte> bytes;
  std::optional<zip::RecordBytes> record;
  if (storage.record != nullptr) {
    record.emplace(checkpoint.archive->read(*storage.record));
    bytes = record->bytes();
    // An io=read image leaves large storage records unread; these values are needed now.
    if (record->is_view() && checkpoint.file->has_holes()) {
      checkpoint.file->fill(
          static_cast<std::uint64_t>(bytes.data() - checkpoint.file->bytes().data()), bytes.size());
    }
    result.record = storage.record->name;
    result.first_offset = start;
  } else if (storage.file_range) {
    const auto& file = storage.file_range->file ? storage.file_range->file : checkpoint.file;
    bytes = file->bytes().subspan(static_cast<std::size_t>(storage.file_range->offset),
                                  static_cast<std::size_t>(storage.nbytes));
    result.first_offset = storage.file_range->offset + start;
  } else {
    throw FormatError(Errc::kTorchBadNestedTensor,
                      fmt::format("_rebuild_nested_tensor: {} has no bytes in the file", what));
  }
  // The tensor's rebuild checked it against its storage, whose bytes these are.
  PTHLOAD_ASSERT(start + size <= bytes.size());
  bytes = bytes.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(size));
  result.values.resize(static_cast<std::size_t>(tensor.numel()));
  for (std::size_t i = 0; i < result.values.size(); ++i) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, bytes.data() + i * 8, 8);
    if (storage.swap_unit == 8) bits = common::byteswap(bits);
    result.values[i] = static_cast<std::int64_t>(bits);
  }
  return result;
}

}  // namespace

Tensor rebuild_nested(RebuildContext& context, const Value& function, const Value& args) {
  expect_arity(args, 4, 4, function);
  constexpr std::string_view kNames[] = {"buffer", "sizes", "strides", "storage_offsets"};
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < 4; ++i) {
    inputs.push_back(dense_argument(context, *args.items()[i], function, kNames[i]));
  }
  for (const Tensor& input : inputs) {
    if (input.has_storage()) context.checkpoint.metadata_storages.push_back(&input.storage());
  }
  const Tensor& buffer = inputs[0];
  const Tensor& sizes = inputs[1];
  const Tensor& strides = inputs[2];
  const Tensor& offsets = inputs[3];
  if (buffer.dim() != 1) {
    bad_arguments(function, fmt::format("buffer is {}-dimensional, not 1", buffer.dim()));
  }
  // sizes and strides: [n, d]; storage_offsets: [n] (torch makes them so: NestedTensorImpl).
  if (sizes.dim() != 2 || strides.dim() != 2 || offsets.dim() != 1 ||
      !std::equal(sizes.sizes().begin(), sizes.sizes().end(), strides.sizes().begin()) ||
      offsets.sizes()[0] != sizes.sizes()[0]) {
    throw FormatError(
        Errc::kTorchBadNestedTensor,
        fmt::format("{}: sizes ({}), strides ({}) and storage_offsets ({}) are not "
                    "[n, d], [n, d] and [n]",
                    global_name(function), fmt::join(sizes.sizes(), ", "),
                    fmt::join(strides.sizes(), ", "), fmt::join(offsets.sizes(), ", ")));
  }
  const auto n = static_cast<std::size_t>(sizes.sizes()[0]);
  const auto d = static_cast<std::size_t>(sizes.sizes()[1]);
  common::check(d <= kMaxDims, [&] {
    return FormatError(Errc::kTorchBadNestedTensor,
                       fmt::format("{}: components have {} dimensions (at most {})",
                                   global_name(function), d, kMaxDims));
  });
  const auto size_values = read_int64_values(context.checkpoint, sizes, "sizes");
  const auto stride_values = read_int64_values(context.checkpoint, strides, "strides");
  const auto offset_values = read_int64_values(context.checkpoint, offsets, "storage_offsets");

  std::vector<Tensor> components;
  components.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::span<const std::int64_t> size(size_values.values.data() + i * d, d);
    const std::span<const std::int64_t> stride(stride_values.values.data() + i * d, d);
    for (std::size_t k = 0; k < d; ++k) {
      if (size[k] < 0)
        size_values.bad(i * d + k, fmt::format("component {} has size {}", i, size[k]));
      if (stride[k] < 0) {
        stride_values.bad(i * d + k, fmt::format("component {} has stride {}", i, stride[k]));
      }
    }
    // Offsets count from the buffer's start, which is where its storage_offset says.
    const std::int64_t relative = offset_values.values[i];
    if (relative < 0 || relative > INT64_MAX - buffer.storage_offset()) {
      offset_values.bad(i, fmt::format("component {} has storage offset {}", i, relative));
    }
    const std::int64_t offset = buffer.storage_offset() + relative;
    // Out of bounds, the error points at the component's sizes.
    common::with_context(
        {.record = size_values.record, .offset = size_values.first_offset + i * d * 8},
        [&] { check_in_bounds(function, buffer.storage(), buffer.dtype(), offset, size, stride); });
    components.push_back(internal::Access::make_tensor(
        buffer.shared_storage(), buffer.dtype(), size, stride, offset, buffer.requires_grad()));
  }
  // torch's nested tensor has no regular shape; its length (the number of components) is.
  const std::int64_t count = static_cast<std::int64_t>(n);
  const std::int64_t zero = 0;
  return internal::Access::make_tensor(Layout::kNested, buffer.dtype(), std::span(&count, 1),
                                       std::span(&zero, 1), buffer.requires_grad(),
                                       std::move(components));
}

}  // namespace pthload::torch
