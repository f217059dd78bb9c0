// Dense tensors: _rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3 and the Parameter
// around them; meta tensors (_rebuild_meta_tensor_no_storage) and tensors of storage-less
// backends saved through a CPU copy (_rebuild_device_tensor_from_cpu_tensor) (torch/_utils.py;
// docs/format.md §3, §7).
#include <fmt/format.h>

#include <cstdint>

#include "checkpoint/access.hpp"
#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "torch/globals.hpp"
#include "torch/rebuild.hpp"
#include "torch/rebuild_args.hpp"

namespace pthload::torch {

using pickle::Value;

// (storage, storage_offset, size, stride[, requires_grad, backward_hooks[, metadata]]) for v1
// and v2; v3 adds the dtype, as its storage is untyped.
Tensor rebuild_dense(RebuildContext& context, KnownGlobal kind, const Value& function,
                     const Value& args) {
  auto [storage, view_byte_offset, view_nbytes] =
      context.storages.resolve(argument(args, 0, function));
  std::int64_t offset = int_argument(argument(args, 1, function), function, "storage_offset");
  if (offset < 0) bad_arguments(function, "storage_offset is negative");
  auto& sizes = context.sizes_scratch;
  auto& strides = context.strides_scratch;
  size_and_stride(argument(args, 2, function), argument(args, 3, function), function, sizes,
                  strides);
  bool requires_grad = false;
  if (kind != KnownGlobal::kRebuildTensor && args.items().size() > 4) {
    requires_grad = bool_argument(*args.items()[4], function, "requires_grad");
  }
  Dtype dtype = storage->dtype();
  if (kind == KnownGlobal::kRebuildTensorV3) {
    // v3 stores bytes (UntypedStorage); the dtype is the explicit 7th argument.
    dtype = dtype_argument(argument(args, 6, function), function);
  }
  // torch packs quint4x2 and quint2x4 only in quantized tensors (_rebuild_qtensor, which checks
  // that they are whole and contiguous, as the readers of packed bytes assume): a dense rebuild
  // of one, with any strides and offset, is no tensor torch makes.
  if (packed_per_byte(dtype) > 1) {
    throw UnsupportedError(
        Errc::kTorchUnsupportedRebuild,
        fmt::format("{}: a {} tensor outside _rebuild_qtensor (torch packs "
                    "{} integers only in quantized tensors)",
                    global_name(function), dtype_name(dtype), dtype_name(dtype)));
  }

  // torch requires numel * element size to fit in 64 bits; without this check, sizes whose
  // product wraps (2^62 x 2^62 x 4 with zero strides) pass the bounds check as a small tensor.
  check_numel(function, dtype, sizes);
  // A legacy storage view bounds the tensor, whose offsets count from the view's start.
  check_in_bounds(function, *storage, dtype, offset, sizes, strides, view_nbytes);
  if (view_byte_offset != 0) {
    // The tensor shares the root storage, as torch's view storage shares its bytes.
    if (view_byte_offset % element_size(dtype) != 0) {
      bad_arguments(function, "a storage view's offset is not a whole number of elements");
    }
    const auto shifted = common::checked_add(static_cast<std::uint64_t>(offset),
                                             view_byte_offset / element_size(dtype));
    if (!shifted || *shifted > static_cast<std::uint64_t>(INT64_MAX)) {
      bad_arguments(function, "storage_offset overflows in its storage view");
    }
    offset = static_cast<std::int64_t>(*shifted);
  }
  return internal::Access::make_tensor(std::move(storage), dtype, sizes, strides, offset,
                                       requires_grad);
}

// Parameter(data, requires_grad, ...): the tensor is data's, with the parameter's flag.
Tensor rebuild_parameter(RebuildContext& context, const Value& function, const Value& args) {
  const Value& data = argument(args, 0, function);
  auto tensor = tensor_of(context, data);
  if (!tensor) bad_arguments(function, "its data is not a tensor");
  // Sparse, meta and quantized parameters keep what their rebuild made.
  if (!tensor->has_storage() || tensor->quantization() != nullptr) return std::move(*tensor);
  const bool requires_grad =
      args.items().size() > 1 ? bool_argument(*args.items()[1], function, "requires_grad") : true;
  return internal::Access::make_tensor(tensor->shared_storage(), tensor->dtype(), tensor->sizes(),
                                       tensor->strides(), tensor->storage_offset(), requires_grad);
}

// (dtype, size, stride, requires_grad): torch.empty_strided on the meta device. No storage and
// no record; the geometry is all there is.
Tensor rebuild_meta(const Value& function, const Value& args) {
  expect_arity(args, 4, 4, function);
  const Dtype dtype = dtype_argument(*args.items()[0], function);
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  size_and_stride(*args.items()[1], *args.items()[2], function, sizes, strides);
  // Nothing bounds the sizes (there are no bytes), so numel × element size must fit 64 bits for
  // numel() and nbytes() to be meaningful.
  check_numel(function, dtype, sizes);
  const bool requires_grad = bool_argument(*args.items()[3], function, "requires_grad");
  return internal::Access::make_tensor(Layout::kStrided, dtype, sizes, strides, requires_grad);
}

// (data, dtype, device, requires_grad): a tensor of a storage-less backend (XLA, ORT, MTIA,
// privateuse1) saved through a CPU copy. torch moves it to `device` (after map_location); pthload
// has no such devices, so the tensor is its CPU data, placed like any storage: by its own tag
// ('cpu') or by map_location. A callable map_location is not refused here, as torch refuses it:
// it is asked about the CPU storage only.
Tensor rebuild_device_from_cpu(RebuildContext& context, const Value& function, const Value& args) {
  expect_arity(args, 4, 4, function);
  const Tensor data = dense_argument(context, *args.items()[0], function, "its data");
  const Dtype dtype = dtype_argument(*args.items()[1], function);
  if (dtype != data.dtype()) {
    // torch converts with data.to(dtype); torch.save writes the data in the tensor's own dtype,
    // so a conversion means a file pthload does not understand.
    throw UnsupportedError(
        Errc::kTorchUnsupportedRebuild,
        fmt::format("{}: converting {} data to {} is not supported", global_name(function),
                    dtype_name(data.dtype()), dtype_name(dtype)));
  }
  (void)device_argument(*args.items()[2], function);
  const bool requires_grad = bool_argument(*args.items()[3], function, "requires_grad");
  return internal::Access::make_tensor(data.shared_storage(), dtype, data.sizes(), data.strides(),
                                       data.storage_offset(), requires_grad);
}

Tensor dense_argument(RebuildContext& context, const Value& value, const Value& function,
                      std::string_view what) {
  auto tensor = tensor_of(context, value);
  if (!tensor || !tensor->has_storage() || tensor->quantization() != nullptr) {
    bad_arguments(function, fmt::format("{} is not a dense tensor", what));
  }
  return std::move(*tensor);
}

}  // namespace pthload::torch
