// Reading the arguments of torch's rebuild calls (torch/_utils.py): every check names the
// function, so a malformed file says which call was wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pickle/value.hpp"
#include "pthload/dtype.hpp"
#include "pthload/tensor.hpp"

namespace pthload::torch {

/// More dimensions than this is no tensor torch can make (at::Tensor caps at 64 in practice);
/// the bound keeps a hostile size tuple from costing more than it should.
inline constexpr std::size_t kMaxDims = 1024;

/// "module.name" of a global, or the kind's name of anything else.
[[nodiscard]] std::string global_name(const pickle::Value& callable);

/// Throws FormatError(kTorchBadRebuildArguments) naming `function`.
[[noreturn]] void bad_arguments(const pickle::Value& function, std::string_view what);

/// The `index`th item of the args tuple; throws when there are fewer.
[[nodiscard]] const pickle::Value& argument(const pickle::Value& args, std::size_t index,
                                            const pickle::Value& function);
/// Throws unless the args tuple has exactly `count` items (or between `count` and `most`).
void expect_arity(const pickle::Value& args, std::size_t count, std::size_t most,
                  const pickle::Value& function);

[[nodiscard]] std::int64_t int_argument(const pickle::Value& value, const pickle::Value& function,
                                        std::string_view what);
[[nodiscard]] double float_argument(const pickle::Value& value, const pickle::Value& function,
                                    std::string_view what);
[[nodiscard]] bool bool_argument(const pickle::Value& value, const pickle::Value& function,
                                 std::string_view what);

/// Sizes and strides: plain tuples in torch.save files, torch.Size(tuple) in some others;
/// non-negative, at most kMaxDims. Written into `result` (reused scratch).
void int_tuple(const pickle::Value& value, const pickle::Value& function, std::string_view what,
               std::vector<std::int64_t>& result);

/// A rebuild's size and stride tuples (int_tuple) into `sizes` and `strides`; throws
/// FormatError(kTorchBadRebuildArguments) unless they have as many dimensions.
void size_and_stride(const pickle::Value& size, const pickle::Value& stride,
                     const pickle::Value& function, std::vector<std::int64_t>& sizes,
                     std::vector<std::int64_t>& strides);

/// The dtype a `torch.<dtype>` global argument names; throws FormatError(kTorchUnknownDtype).
[[nodiscard]] Dtype dtype_argument(const pickle::Value& value, const pickle::Value& function);

/// The device string of a rebuild's `device` argument: a string ('xla:0'), or torch.device(type
/// [, index]) / torch.device('type:index') as torch pickles a device. Throws
/// FormatError(kTorchBadRebuildArguments) for anything else.
[[nodiscard]] std::string device_argument(const pickle::Value& value,
                                          const pickle::Value& function);

/// The name of a layout argument without `torch.` ("strided", "sparse_coo"): torch >= 2.0 pickles
/// a layout as torch.serialization._get_layout('torch.strided'), 1.x as the global torch.strided.
/// Throws FormatError(kTorchBadRebuildArguments) for anything else.
[[nodiscard]] std::string_view layout_name_argument(const pickle::Value& value,
                                                    const pickle::Value& function);

/// Throws FormatError(kTorchTensorOutOfBounds) unless a `dtype` tensor of `sizes` and `strides`
/// at `offset` lies inside `storage` — or inside its first `limit_bytes` when given (a legacy
/// storage view): a hostile file must not make a tensor read past its bytes.
void check_in_bounds(const pickle::Value& function, const Storage& storage, Dtype dtype,
                     std::int64_t offset, std::span<const std::int64_t> sizes,
                     std::span<const std::int64_t> strides,
                     std::optional<std::uint64_t> limit_bytes = std::nullopt);

/// Throws FormatError(kTorchBadRebuildArguments) unless numel × element size of `dtype` fits
/// in 64 bits (a tensor without storage has no bytes to bound its sizes).
void check_numel(const pickle::Value& function, Dtype dtype, std::span<const std::int64_t> sizes);

}  // namespace pthload::torch
