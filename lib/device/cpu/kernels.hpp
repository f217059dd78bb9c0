// The CPU references of the device kernels (lib/device/cuda/kernels.cu): byte swap, floating
// dtype conversion, strided view to contiguous. The host backend runs them; the tests compare
// them with values torch computed, and the cuda suite compares the kernels with them.
#pragma once

#include <cstddef>
#include <span>

#include "device/backend.hpp"
#include "pthload/dtype.hpp"

namespace pthload::device::cpu {

/// Reverses the bytes of every `unit`-byte element (2, 4 or 8; 1 does nothing).
void byteswap(std::span<std::byte> bytes, std::size_t unit) noexcept;

/// Whether convert() handles `dtype`: float32, bfloat16, float16, float8_e4m3fn, float8_e5m2.
[[nodiscard]] bool is_convertible(Dtype dtype) noexcept;

/// Converts `count` elements from `source` (of `from`) into `destination` (of `to`), rounding
/// to nearest even exactly as torch's Tensor.to(dtype) (NaN becomes the target's NaN). Both
/// dtypes must be is_convertible; the spans must hold `count` elements.
void convert(std::span<const std::byte> source, Dtype from, std::span<std::byte> destination,
             Dtype to, std::size_t count) noexcept;

/// The bytes `view` covers, from its first element to the end of its last (0 when empty): how
/// much of a source the gather reads. Views with negative strides are not torch's.
[[nodiscard]] std::size_t strided_extent(const StridedView& view) noexcept;

/// Elements in `view` (the product of its sizes).
[[nodiscard]] std::size_t element_count(const StridedView& view) noexcept;

/// Writes the elements of `view` of `source`, in row-major order, to `destination`
/// (element_count × element_size bytes). `source` must hold strided_extent(view) bytes.
void make_contiguous(const std::byte* source, const StridedView& view,
                     std::byte* destination) noexcept;

}  // namespace pthload::device::cpu
