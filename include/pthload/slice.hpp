// A slice of one tensor, read and placed without the rest of it: what a tensor-parallel rank
// loads (safetensors' get_slice, as vLLM and TGI use it).
#pragma once

#include <cstdint>
#include <string_view>

#include "pthload/checkpoint.hpp"
#include "pthload/device.hpp"
#include "pthload/export.hpp"
#include "pthload/options.hpp"
#include "pthload/tensor.hpp"

namespace pthload {

/// The elements [begin, end) along dimension `dim` of the tensor `name` of `checkpoint`, as a
/// new contiguous tensor on `device` that owns its storage — torch's
/// `t.narrow(dim, begin, end - begin).contiguous().to(device)`, strides included: a slice with no
/// elements keeps the tensor's strides, as narrow() leaves them (any strides are contiguous
/// there). `dim` is the first (0) or the last (-1, or dim() - 1) dimension. Only the slice's
/// bytes are read from the file: one contiguous run for the first dimension, one run per row
/// gathered into a contiguous result for the last.
/// `checkpoint` may be opened (nothing placed; the usual case) or loaded with the tensor's
/// storage on the CPU. CUDA devices are placed through the same pipeline as load() (`cuda`).
/// The tensor must be dense, contiguous and not quantized. A negative `begin` or `end` counts
/// from the end of the dimension, as in Python (`-2` is `sizes()[dim] - 2`; -sizes()[dim] at
/// the least); then 0 <= begin <= end <= sizes()[dim] must hold (no clamping). Throws
/// FormatError(kTorchNameNotFound) for an unknown name, UnsupportedError(kSliceBadRange) for
/// another dim, a range outside the tensor or kSkipStorage as `device`,
/// UnsupportedError(kSliceUnsupported) for a tensor it cannot slice (or one whose storage was
/// placed on a GPU or on meta; the message names which), and DeviceError as load(). `device` is
/// checked as a map_location answer is (device.hpp).
[[nodiscard]] PTHLOAD_API Tensor load_slice(const Checkpoint& checkpoint, std::string_view name,
                                            int dim, std::int64_t begin, std::int64_t end,
                                            Device device = Device::cpu(),
                                            const CudaOptions& cuda = {});

}  // namespace pthload
