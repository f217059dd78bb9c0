// CPU references of the device kernels (see kernels.hpp).
#include "device/cpu/kernels.hpp"

#include <cstdint>
#include <cstring>

#include "common/assert.hpp"
#include "common/byte_reader.hpp"
#include "device/cpu/float_bits.hpp"

namespace pthload::device::cpu {
namespace {

template <typename T>
void swap_all(std::span<std::byte> bytes) noexcept {
  for (std::size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
    T value;
    std::memcpy(&value, bytes.data() + i, sizeof(T));
    value = common::byteswap(value);
    std::memcpy(bytes.data() + i, &value, sizeof(T));
  }
}

// float32 is its own format; the others go through bits::*.
const bits::NarrowFormat* narrow_format(Dtype dtype) noexcept {
  switch (dtype) {
    case Dtype::kBFloat16:
      return &bits::kBFloat16;
    case Dtype::kFloat16:
      return &bits::kFloat16;
    case Dtype::kFloat8E4M3FN:
      return &bits::kFloat8E4M3FN;
    case Dtype::kFloat8E5M2:
      return &bits::kFloat8E5M2;
    default:
      return nullptr;
  }
}

std::uint32_t load_bits(const std::byte* at, std::size_t size) noexcept {
  std::uint32_t value = 0;
  if (size == 4) {
    std::memcpy(&value, at, 4);
  } else if (size == 2) {
    std::uint16_t half;
    std::memcpy(&half, at, 2);
    value = half;
  } else {
    value = static_cast<std::uint8_t>(*at);
  }
  return value;
}

void store_bits(std::byte* at, std::size_t size, std::uint32_t value) noexcept {
  if (size == 4) {
    std::memcpy(at, &value, 4);
  } else if (size == 2) {
    const auto half = static_cast<std::uint16_t>(value);
    std::memcpy(at, &half, 2);
  } else {
    *at = static_cast<std::byte>(value);
  }
}

}  // namespace

void byteswap(std::span<std::byte> bytes, std::size_t unit) noexcept {
  switch (unit) {
    case 2:
      swap_all<std::uint16_t>(bytes);
      break;
    case 4:
      swap_all<std::uint32_t>(bytes);
      break;
    case 8:
      swap_all<std::uint64_t>(bytes);
      break;
    default:
      break;  // one-byte elements have no byte order
  }
}

bool is_convertible(Dtype dtype) noexcept {
  return dtype == Dtype::kFloat32 || narrow_format(dtype) != nullptr;
}

void convert(std::span<const std::byte> source, Dtype from, std::span<std::byte> destination,
             Dtype to, std::size_t count) noexcept {
  PTHLOAD_ASSERT(is_convertible(from) && is_convertible(to));
  const std::size_t from_size = element_size(from);
  const std::size_t to_size = element_size(to);
  PTHLOAD_ASSERT(source.size() >= count * from_size && destination.size() >= count * to_size);
  const bits::NarrowFormat* from_format = narrow_format(from);
  const bits::NarrowFormat* to_format = narrow_format(to);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t value = load_bits(source.data() + i * from_size, from_size);
    // Every narrow value is exactly a float32, so going through float32 rounds once, as torch
    // does (its conversions between reduced types go through float).
    if (from_format != nullptr) value = bits::f32_from_narrow(value, *from_format);
    if (to_format != nullptr) value = bits::narrow_from_f32(value, *to_format);
    store_bits(destination.data() + i * to_size, to_size, value);
  }
}

std::size_t element_count(const StridedView& view) noexcept {
  std::size_t count = 1;
  for (std::size_t d = 0; d < view.dims; ++d)
    count *= static_cast<std::size_t>(view.sizes[d]);
  return count;
}

std::size_t strided_extent(const StridedView& view) noexcept {
  if (element_count(view) == 0) return 0;
  auto last = static_cast<std::size_t>(view.offset);
  for (std::size_t d = 0; d < view.dims; ++d)
    last += static_cast<std::size_t>((view.sizes[d] - 1) * view.strides[d]);
  return (last + 1) * view.element_size;
}

void make_contiguous(const std::byte* source, const StridedView& view,
                     std::byte* destination) noexcept {
  const std::size_t count = element_count(view);
  if (count == 0) return;
  std::int64_t index[kMaxGatherDims] = {};
  std::int64_t at = view.offset;  // the source element of the current index
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(destination + i * view.element_size,
                source + static_cast<std::size_t>(at) * view.element_size, view.element_size);
    // Advance the row-major index, carrying from the last dimension.
    for (std::size_t d = view.dims; d-- > 0;) {
      at += view.strides[d];
      if (++index[d] < view.sizes[d]) break;
      at -= view.strides[d] * view.sizes[d];
      index[d] = 0;
    }
  }
}

}  // namespace pthload::device::cpu
