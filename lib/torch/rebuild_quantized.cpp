// _rebuild_qtensor: quantized tensors (torch/_utils.py _rebuild_qtensor; docs/format.md §3, §4).
// The elements are the storage's integers as for a dense tensor; the quantizer parameters say
// how they map to reals. A checksum hashes the integers (torch's int_repr()).
#include <fmt/format.h>

#include <memory>

#include "checkpoint/access.hpp"
#include "pthload/error.hpp"
#include "torch/globals.hpp"
#include "torch/rebuild.hpp"
#include "torch/rebuild_args.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

[[noreturn]] void bad_quantizer(const Value& function, std::string_view what) {
  throw FormatError(Errc::kTorchBadQuantizerParams,
                    fmt::format("{}: quantizer_params: {}", global_name(function), what));
}

// The qscheme is pickled as the attribute it is: GLOBAL torch per_tensor_affine.
QScheme qscheme_of(const Value& value, const Value& function) {
  if (value.is(Kind::kGlobal) && value.module() == "torch") {
    if (value.name() == "per_tensor_affine") return QScheme::kPerTensorAffine;
    if (value.name() == "per_channel_affine") return QScheme::kPerChannelAffine;
    if (value.name() == "per_channel_affine_float_qparams") {
      return QScheme::kPerChannelAffineFloatQParams;
    }
    // torch.per_tensor_symmetric and per_channel_symmetric exist as qschemes, but torch's
    // _rebuild_qtensor raises for them: torch.save never writes them.
    throw UnsupportedError(Errc::kTorchUnsupportedRebuild,
                           fmt::format("{}: qscheme torch.{} is not supported (torch.load "
                                       "rejects it too)",
                                       global_name(function), value.name()));
  }
  bad_quantizer(function, fmt::format("the qscheme is a {}, not a torch.<qscheme> global",
                                      global_name(value)));
}

Tensor quantizer_tensor(RebuildContext& context, const Value& value, const Value& function,
                        std::string_view what) {
  auto tensor = tensor_of(context, value);
  if (!tensor) {
    // torch 1.x wrote lists in some versions' per-channel params; torch.save since 1.6 writes
    // tensors, which is all that is read here.
    throw UnsupportedError(Errc::kTorchUnsupportedRebuild,
                           fmt::format("{}: {} is a {}, not a tensor", global_name(function), what,
                                       pickle::kind_name(value.kind())));
  }
  if (!tensor->has_storage() || tensor->quantization() != nullptr || tensor->dim() != 1) {
    bad_quantizer(function, fmt::format("{} is not a 1-D dense tensor", what));
  }
  return std::move(*tensor);
}

}  // namespace

Tensor rebuild_quantized(RebuildContext& context, const Value& function, const Value& args) {
  // (storage, storage_offset, size, stride, quantizer_params, requires_grad, backward_hooks)
  expect_arity(args, 7, 7, function);
  auto [storage, view_byte_offset, view_nbytes] = context.storages.resolve(*args.items()[0]);
  // Storage views come only from torch before 0.4, which had no quantized tensors.
  if (view_nbytes || view_byte_offset != 0) {
    throw UnsupportedError(
        Errc::kTorchUnsupportedRebuild,
        fmt::format("{}: a quantized tensor over a legacy storage view", global_name(function)));
  }
  const std::int64_t offset = int_argument(*args.items()[1], function, "storage_offset");
  if (offset < 0) bad_arguments(function, "storage_offset is negative");
  auto& sizes = context.sizes_scratch;
  auto& strides = context.strides_scratch;
  size_and_stride(*args.items()[2], *args.items()[3], function, sizes, strides);
  const Dtype dtype = storage->dtype();
  if (!is_quantized(dtype)) {
    bad_arguments(function, fmt::format("storage '{}' holds {}, not a quantized dtype",
                                        storage->key(), dtype_name(dtype)));
  }
  // Before any other use of the sizes, as in rebuild_dense: sizes whose product wraps (a
  // (6148914691236517207, 3) tensor of 5 elements) would pass the bounds check with zero
  // strides, and every reader sized by numel() would then write past its buffer.
  check_numel(function, dtype, sizes);
  if (const std::uint64_t per_byte = packed_per_byte(dtype); per_byte > 1) {
    // quint4x2 and quint2x4 pack 2 and 4 integers into a byte: torch's storage holds
    // ceil(numel / per_byte) bytes, and only a whole, contiguous tensor is meaningful.
    const Tensor probe =
        internal::Access::make_tensor(storage, dtype, sizes, strides, offset, false);
    if (offset != 0 || !probe.is_contiguous()) {
      throw UnsupportedError(Errc::kTorchUnsupportedRebuild,
                             fmt::format("{}: a {} view (offset {}, non-contiguous strides) is "
                                         "not supported",
                                         global_name(function), dtype_name(dtype), offset));
    }
    if (packed_nbytes(dtype, probe.numel()) > storage->nbytes()) {
      throw FormatError(Errc::kTorchTensorOutOfBounds,
                        fmt::format("{}: {} packed {} elements need more than the {} bytes of "
                                    "storage '{}'",
                                    global_name(function), probe.numel(), dtype_name(dtype),
                                    storage->nbytes(), storage->key()));
    }
  } else {
    check_in_bounds(function, *storage, dtype, offset, sizes, strides);
  }
  const bool requires_grad = bool_argument(*args.items()[5], function, "requires_grad");

  const Value& params = *args.items()[4];
  if (!params.is(Kind::kTuple) || params.items().empty()) {
    bad_quantizer(function, "not a (qscheme, ...) tuple");
  }
  const auto fields = params.items();
  auto quantization = std::make_shared<Quantization>();
  quantization->scheme = qscheme_of(*fields[0], function);
  if (quantization->scheme == QScheme::kPerTensorAffine) {
    if (fields.size() != 3) {
      bad_quantizer(function, fmt::format("per_tensor_affine takes (qscheme, scale, zero_point), "
                                          "got {} items",
                                          fields.size()));
    }
    quantization->scale = float_argument(*fields[1], function, "scale");
    quantization->zero_point = int_argument(*fields[2], function, "zero_point");
  } else {
    if (fields.size() != 4) {
      bad_quantizer(function, fmt::format("{} takes (qscheme, scales, zero_points, axis), got {} "
                                          "items",
                                          qscheme_name(quantization->scheme), fields.size()));
    }
    // Tensors rebuilt with the scratch vectors: the qtensor's own sizes are copied first.
    const std::vector<std::int64_t> own_sizes = sizes;
    const std::vector<std::int64_t> own_strides = strides;
    quantization->scales = quantizer_tensor(context, *fields[1], function, "scales");
    quantization->zero_points = quantizer_tensor(context, *fields[2], function, "zero_points");
    const std::int64_t axis = int_argument(*fields[3], function, "axis");
    // torch checks the axis against the tensor's dimensions and one scale and zero point per
    // channel (aten/src/ATen/quantized/Quantizer.cpp checkPerChannelParamDims and
    // make_per_channel_affine_quantizer): a file breaking them cannot be loaded by torch either.
    if (axis < 0 || static_cast<std::size_t>(axis) >= own_sizes.size()) {
      bad_quantizer(function, fmt::format("axis {} is outside a {}-dimensional tensor", axis,
                                          own_sizes.size()));
    }
    quantization->axis = axis;
    // torch.save writes per_channel_affine for per_channel_affine_float_qparams too
    // (torch/_tensor.py _reduce_ex_internal); torch.load tells them apart by the zero points'
    // dtype (a floating one makes float qparams: _empty_per_channel_affine_quantized), and so do
    // we.
    const Dtype zero_point_dtype = quantization->zero_points->dtype();
    if (zero_point_dtype == Dtype::kFloat32 || zero_point_dtype == Dtype::kFloat64 ||
        zero_point_dtype == Dtype::kFloat16 || zero_point_dtype == Dtype::kBFloat16) {
      quantization->scheme = QScheme::kPerChannelAffineFloatQParams;
    }
    const auto channels = static_cast<std::uint64_t>(own_sizes[static_cast<std::size_t>(axis)]);
    if (quantization->scales->numel() != channels ||
        quantization->zero_points->numel() != channels) {
      bad_quantizer(function, fmt::format("{} scales and {} zero points for {} channels along "
                                          "axis {}",
                                          quantization->scales->numel(),
                                          quantization->zero_points->numel(), channels, axis));
    }
    Tensor tensor = internal::Access::make_tensor(std::move(storage), dtype, own_sizes, own_strides,
                                                  offset, requires_grad);
    internal::Access::set_quantization(tensor, std::move(quantization));
    return tensor;
  }
  Tensor tensor = internal::Access::make_tensor(std::move(storage), dtype, sizes, strides, offset,
                                                requires_grad);
  internal::Access::set_quantization(tensor, std::move(quantization));
  return tensor;
}

}  // namespace pthload::torch
