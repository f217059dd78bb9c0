// Tensors whose rebuild names no storage of their own (torch/_utils.py
// _rebuild_meta_tensor_no_storage, _rebuild_wrapper_subclass,
// _rebuild_device_tensor_from_cpu_tensor; docs/format.md §3, §7).
#include <fmt/format.h>

#include "pthload/error.hpp"
#include "torch/access.hpp"
#include "torch/rebuild_args.hpp"
#include "torch/tensor_builder.hpp"

namespace pthload::torch {

using pickle::Kind;
using pickle::Value;

// (dtype, size, stride, requires_grad): torch.empty_strided on the meta device. No storage and
// no record; the geometry is all there is.
Tensor TensorBuilder::rebuild_meta(const Value& function, const Value& args) {
  expect_arity(args, 4, 4, function);
  const Dtype dtype = dtype_argument(*args.items()[0], function);
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  int_tuple(*args.items()[1], function, "size", sizes);
  int_tuple(*args.items()[2], function, "stride", strides);
  if (sizes.size() != strides.size()) {
    bad_arguments(function, fmt::format("size has {} dimensions but stride has {}", sizes.size(),
                                        strides.size()));
  }
  // Nothing bounds the sizes (there are no bytes), so numel × element size must fit 64 bits for
  // numel() and nbytes() to be meaningful.
  check_numel(function, dtype, sizes);
  const bool requires_grad = bool_argument(*args.items()[3], function, "requires_grad");
  return Tensor(Layout::kStrided, dtype, sizes, strides, requires_grad);
}

// (cls, dtype, size, stride, storage_offset, layout, device, requires_grad):
// torch.Tensor._make_wrapper_subclass(cls, ...) for a __torch_dispatch__ subclass whose data_ptr()
// is 0. No storage, like a meta tensor; the class and the device (which load() passes through
// map_location) are kept.
Tensor TensorBuilder::rebuild_wrapper_subclass(const Value& function, const Value& args) {
  expect_arity(args, 8, 8, function);
  const auto items = args.items();
  if (!items[0]->is(Kind::kGlobal)) bad_arguments(function, "cls is not a class (a global)");
  const Dtype dtype = dtype_argument(*items[1], function);
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  int_tuple(*items[2], function, "size", sizes);
  int_tuple(*items[3], function, "stride", strides);
  if (sizes.size() != strides.size()) {
    bad_arguments(function, fmt::format("size has {} dimensions but stride has {}", sizes.size(),
                                        strides.size()));
  }
  const std::int64_t offset = int_argument(*items[4], function, "storage_offset");
  if (offset < 0) bad_arguments(function, "storage_offset is negative");
  const auto layout = layout_name_argument(*items[5], function);
  if (layout != "strided") {
    throw UnsupportedError(Errc::kTorchUnsupportedRebuild,
                           fmt::format("{}: a wrapper subclass of layout '{}' is not supported",
                                       global_name(function), layout));
  }
  std::string location = device_argument(*items[6], function);
  const bool requires_grad = bool_argument(*items[7], function, "requires_grad");
  check_numel(function, dtype, sizes);

  std::optional<Device> device;
  try {
    device = Device::parse(location);
  } catch (const Error&) {
    // 'xla:0' and the like: load() asks map_location, and refuses it without one.
  }
  Tensor tensor(Layout::kStrided, dtype, sizes, strides, requires_grad);
  internal::Access::set_wrapper_subclass(
      tensor,
      std::make_shared<const WrapperSubclass>(WrapperSubclass{
          .subclass = global_name(*items[0]), .location = std::move(location), .device = device}),
      offset);
  return tensor;
}

// (data, dtype, device, requires_grad): a tensor of a storage-less backend (XLA, ORT, MTIA,
// privateuse1) saved through a CPU copy. torch moves it to `device` (after map_location); pthload
// has no such devices, so the tensor is its CPU data, placed like any storage: by its own tag
// ('cpu') or by map_location. A callable map_location is not refused here, as torch refuses it:
// it is asked about the CPU storage only.
Tensor TensorBuilder::rebuild_device_from_cpu(const Value& function, const Value& args) {
  expect_arity(args, 4, 4, function);
  auto data = tensor_of(*args.items()[0]);
  if (!data || !data->has_storage() || data->quantization() != nullptr) {
    bad_arguments(function, "its data is not a dense tensor");
  }
  const Dtype dtype = dtype_argument(*args.items()[1], function);
  if (dtype != data->dtype()) {
    // torch converts with data.to(dtype); torch.save writes the data in the tensor's own dtype,
    // so a conversion means a file pthload does not understand.
    throw UnsupportedError(
        Errc::kTorchUnsupportedRebuild,
        fmt::format("{}: converting {} data to {} is not supported", global_name(function),
                    dtype_name(data->dtype()), dtype_name(dtype)));
  }
  (void)device_argument(*args.items()[2], function);
  const bool requires_grad = bool_argument(*args.items()[3], function, "requires_grad");
  return Tensor(data->shared_storage(), dtype, data->sizes(), data->strides(),
                data->storage_offset(), requires_grad);
}

}  // namespace pthload::torch
