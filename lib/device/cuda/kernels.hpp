// Launchers of the device kernels (kernels.cu, built by nvcc), each the device twin of a CPU
// reference in lib/device/cpu/kernels.hpp. Each returns the launch's cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "device/backend.hpp"
#include "pthload/dtype.hpp"

namespace pthload::device::cuda {

/// Reverses the bytes of every `unit`-byte element of `bytes` bytes at `data`.
cudaError_t launch_byteswap(void* data, std::size_t bytes, std::size_t unit, cudaStream_t stream);
/// Converts `count` elements (cpu::is_convertible dtypes) as cpu::convert does.
cudaError_t launch_convert(const void* source, Dtype from, void* destination, Dtype to,
                           std::size_t count, cudaStream_t stream);
/// Gathers `view` of `source` into contiguous `destination`, as cpu::make_contiguous does.
cudaError_t launch_make_contiguous(const void* source, const StridedView& view, void* destination,
                                   cudaStream_t stream);

}  // namespace pthload::device::cuda
