// The device kernels: byte swap, floating dtype conversion, strided gather. Memory-bound, so
// each thread moves 16 bytes where it can and the grid strides over the data (a persistent
// grid sized from the launch, not the data). The scalar conversions are float_bits.hpp's, the
// code the CPU reference runs, so both compute the same function.
#include <cstdint>

#include "device/cpu/float_bits.hpp"
#include "device/cuda/kernels.hpp"

namespace pthload::device::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;

unsigned blocks_for(std::size_t items) {
  const std::size_t blocks = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// 16 bytes per thread: a uint4 is 4 words, each swapped by unit.
template <int kUnit>
__global__ void byteswap_vectors(uint4* data, std::size_t vectors) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < vectors;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    uint4 v = data[i];
    if constexpr (kUnit == 2) {
      v.x = __byte_perm(v.x, 0, 0x2301);
      v.y = __byte_perm(v.y, 0, 0x2301);
      v.z = __byte_perm(v.z, 0, 0x2301);
      v.w = __byte_perm(v.w, 0, 0x2301);
    } else if constexpr (kUnit == 4) {
      v.x = __byte_perm(v.x, 0, 0x0123);
      v.y = __byte_perm(v.y, 0, 0x0123);
      v.z = __byte_perm(v.z, 0, 0x0123);
      v.w = __byte_perm(v.w, 0, 0x0123);
    } else {
      const unsigned x = __byte_perm(v.y, 0, 0x0123);
      const unsigned y = __byte_perm(v.x, 0, 0x0123);
      const unsigned z = __byte_perm(v.w, 0, 0x0123);
      const unsigned w = __byte_perm(v.z, 0, 0x0123);
      v = make_uint4(x, y, z, w);
    }
    data[i] = v;
  }
}

// The tail that is not a whole vector (or a buffer not 16-byte aligned): one element a thread.
__global__ void byteswap_elements(unsigned char* data, std::size_t elements, int unit) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       i < elements; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned char* element = data + i * unit;
    for (int b = 0; b < unit / 2; ++b) {
      const unsigned char t = element[b];
      element[b] = element[unit - 1 - b];
      element[unit - 1 - b] = t;
    }
  }
}

struct Format {
  bool is_f32;
  bits::NarrowFormat narrow;
  int size;
};

__device__ std::uint32_t load(const unsigned char* at, int size) {
  if (size == 4) return *reinterpret_cast<const std::uint32_t*>(at);
  if (size == 2) return *reinterpret_cast<const std::uint16_t*>(at);
  return *at;
}

__device__ void store(unsigned char* at, int size, std::uint32_t value) {
  if (size == 4) {
    *reinterpret_cast<std::uint32_t*>(at) = value;
  } else if (size == 2) {
    *reinterpret_cast<std::uint16_t*>(at) = static_cast<std::uint16_t>(value);
  } else {
    *at = static_cast<unsigned char>(value);
  }
}

__global__ void convert_elements(const unsigned char* source, Format from,
                                 unsigned char* destination, Format to, std::size_t count) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint32_t value = load(source + i * from.size, from.size);
    if (!from.is_f32) value = bits::f32_from_narrow(value, from.narrow);
    if (!to.is_f32) value = bits::narrow_from_f32(value, to.narrow);
    store(destination + i * to.size, to.size, value);
  }
}

__global__ void gather(const unsigned char* source, StridedView view, unsigned char* destination,
                       std::size_t count) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::size_t rest = i;
    std::int64_t at = view.offset;
    for (std::size_t d = view.dims; d-- > 0;) {
      const auto size = static_cast<std::size_t>(view.sizes[d]);
      at += static_cast<std::int64_t>(rest % size) * view.strides[d];
      rest /= size;
    }
    const unsigned char* from = source + static_cast<std::size_t>(at) * view.element_size;
    unsigned char* into = destination + i * view.element_size;
    for (std::size_t b = 0; b < view.element_size; ++b)
      into[b] = from[b];
  }
}

bool format_of(Dtype dtype, Format& format) {
  switch (dtype) {
    case Dtype::kFloat32:
      format = {true, bits::kBFloat16, 4};
      return true;
    case Dtype::kBFloat16:
      format = {false, bits::kBFloat16, 2};
      return true;
    case Dtype::kFloat16:
      format = {false, bits::kFloat16, 2};
      return true;
    case Dtype::kFloat8E4M3FN:
      format = {false, bits::kFloat8E4M3FN, 1};
      return true;
    case Dtype::kFloat8E5M2:
      format = {false, bits::kFloat8E5M2, 1};
      return true;
    default:
      return false;
  }
}

}  // namespace

cudaError_t launch_byteswap(void* data, std::size_t bytes, std::size_t unit, cudaStream_t stream) {
  if (unit <= 1 || bytes == 0) return cudaSuccess;
  auto* base = static_cast<unsigned char*>(data);
  std::size_t vector_bytes = 0;
  if (reinterpret_cast<std::uintptr_t>(data) % 16 == 0) {
    vector_bytes = bytes / 16 * 16;
    const std::size_t vectors = vector_bytes / 16;
    if (vectors > 0) {
      auto* v = reinterpret_cast<uint4*>(base);
      if (unit == 2) byteswap_vectors<2><<<blocks_for(vectors), kThreads, 0, stream>>>(v, vectors);
      if (unit == 4) byteswap_vectors<4><<<blocks_for(vectors), kThreads, 0, stream>>>(v, vectors);
      if (unit == 8) byteswap_vectors<8><<<blocks_for(vectors), kThreads, 0, stream>>>(v, vectors);
    }
  }
  const std::size_t tail = (bytes - vector_bytes) / unit;
  if (tail > 0) {
    byteswap_elements<<<blocks_for(tail), kThreads, 0, stream>>>(base + vector_bytes, tail,
                                                                 static_cast<int>(unit));
  }
  return cudaGetLastError();
}

cudaError_t launch_convert(const void* source, Dtype from, void* destination, Dtype to,
                           std::size_t count, cudaStream_t stream) {
  Format from_format{};
  Format to_format{};
  if (!format_of(from, from_format) || !format_of(to, to_format)) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  convert_elements<<<blocks_for(count), kThreads, 0, stream>>>(
      static_cast<const unsigned char*>(source), from_format,
      static_cast<unsigned char*>(destination), to_format, count);
  return cudaGetLastError();
}

cudaError_t launch_make_contiguous(const void* source, const StridedView& view, void* destination,
                                   cudaStream_t stream) {
  std::size_t count = 1;
  for (std::size_t d = 0; d < view.dims; ++d)
    count *= static_cast<std::size_t>(view.sizes[d]);
  if (count == 0) return cudaSuccess;
  gather<<<blocks_for(count), kThreads, 0, stream>>>(static_cast<const unsigned char*>(source),
                                                     view, static_cast<unsigned char*>(destination),
                                                     count);
  return cudaGetLastError();
}

}  // namespace pthload::device::cuda
