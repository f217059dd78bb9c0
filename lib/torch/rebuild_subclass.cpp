// Tensor subclasses: _rebuild_from_type_v2, which wraps any rebuild in a Python subclass, and
// _rebuild_wrapper_subclass, a __torch_dispatch__ subclass with no storage (torch/_tensor.py,
// torch/_utils.py; docs/format.md §3).
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "checkpoint/access.hpp"
#include "pthload/error.hpp"
#include "torch/globals.hpp"
#include "torch/rebuild.hpp"
#include "torch/rebuild_args.hpp"

namespace pthload::torch {

using pickle::Kind;
using pickle::Value;

// _rebuild_from_type_v2(func, new_type, args, state): the tensor is func(*args); the subclass and
// its attributes are metadata torch applies afterwards.
std::optional<Tensor> rebuild_from_type(RebuildContext& context, const Value& function,
                                        const Value& args) {
  const Value& inner_callable = argument(args, 0, function);
  const Value& inner_args = argument(args, 2, function);
  if (!inner_args.is(Kind::kTuple)) bad_arguments(function, "its args are not a tuple");
  // A jagged nested tensor (NJT) is a Python subclass over its values and offsets tensors: no
  // tensor of its own; the naming walk lists those parts (`<name>.values`...).
  if (classify_global(inner_callable) == KnownGlobal::kRebuildJagged) return std::nullopt;
  auto tensor = rebuild(context, inner_callable, inner_args);
  if (!tensor)
    bad_arguments(function, fmt::format("{} made no tensor", global_name(inner_callable)));
  return tensor;
}

// (cls, dtype, size, stride, storage_offset, layout, device, requires_grad):
// torch.Tensor._make_wrapper_subclass(cls, ...) for a __torch_dispatch__ subclass whose data_ptr()
// is 0. No storage, like a meta tensor; the class and the device (which load() passes through
// map_location) are kept.
Tensor rebuild_wrapper_subclass(const Value& function, const Value& args) {
  expect_arity(args, 8, 8, function);
  const auto items = args.items();
  if (!items[0]->is(Kind::kGlobal)) bad_arguments(function, "cls is not a class (a global)");
  const Dtype dtype = dtype_argument(*items[1], function);
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  size_and_stride(*items[2], *items[3], function, sizes, strides);
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
  Tensor tensor =
      internal::Access::make_tensor(Layout::kStrided, dtype, sizes, strides, requires_grad);
  internal::Access::set_wrapper_subclass(
      tensor,
      std::make_shared<const WrapperSubclass>(WrapperSubclass{
          .subclass = global_name(*items[0]), .location = std::move(location), .device = device}),
      offset);
  return tensor;
}

}  // namespace pthload::torch
