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

/// The elements [begin, end) along dimension `dim` of the tensor `name` of `checkpoint`, as a new
/// contiguous tensor on `device` that owns its storage — torch's
/// `t.narrow(dim, begin, end - begin).contiguous().to(device)`, strides included: a slice with no
/// elements keeps the tensor's strides, as narrow() leaves them (any strides are contiguous
/// there). Returned by value: the caller owns it, and it stays valid after `checkpoint` is gone. It
/// keeps the tensor's dtype and requires_grad; its bytes are in the host's byte order (a big-endian
/// file's elements are swapped). `dim` is the first (0, or -dim()) or the last (-1, or dim() - 1)
/// dimension. Only the slice's bytes are read from the file: one contiguous run for the first
/// dimension, one run per row gathered into a contiguous result for the last (a deflated record,
/// which torch.save does not write, is inflated whole first).
/// `checkpoint` may be opened (nothing placed; the usual case) or loaded with the tensor's storage
/// on the CPU (then the slice is copied from memory). CUDA devices are placed through the same
/// pipeline as load() (`cuda`; ignored for other devices); on meta the result has sizes and no
/// bytes. The tensor must be dense, contiguous, not quantized and have at least one dimension. A
/// negative `begin` or `end` counts from the end of the dimension, as in Python (`-2` is
/// `sizes()[dim] - 2`; -sizes()[dim] at the least); then 0 <= begin <= end <= sizes()[dim] must
/// hold (no clamping). Throws FormatError(kTorchNameNotFound) for an unknown name,
/// UnsupportedError(kSliceBadRange) for another dim, a range outside the tensor or kSkipStorage as
/// `device`, UnsupportedError(kSliceUnsupported) for a tensor it cannot slice (or one whose storage
/// was placed on a GPU or on meta; the message names which), IoError when the file cannot be read,
/// DeviceError as load(), and std::bad_alloc. `device` is checked as a map_location answer is
/// (device.hpp).
[[nodiscard]] PTHLOAD_API Tensor load_slice(const Checkpoint& checkpoint, std::string_view name,
                                            int dim, std::int64_t begin, std::int64_t end,
                                            Device device = Device::cpu(),
                                            const CudaOptions& cuda = {});

}  // namespace pthload
