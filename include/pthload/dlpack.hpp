// Tensors handed to other frameworks through DLPack (dlpack.h 0.6 and later) without copying:
// numpy.from_dlpack, torch.from_dlpack, JAX, CuPy, TVM.
#pragma once

#include <dlpack/dlpack.h>

#include <optional>

#include "pthload/dtype.hpp"
#include "pthload/export.hpp"
#include "pthload/tensor.hpp"

namespace pthload {

/// The DLPack type of `dtype`: floats (float16, bfloat16, float32, float64), complex types,
/// signed and unsigned integers, and bool (kDLBool where dlpack.h has it, since DLPack 0.8;
/// before, uint8 holding 0 or 1, as consumers of those versions read it), one lane each, by
/// value. nullopt for dtypes DLPack 0.6 cannot describe: quantized, packed sub-byte, float8 and
/// bits types.
[[nodiscard]] PTHLOAD_API std::optional<DLDataType> dlpack_dtype(Dtype dtype) noexcept;

/// `tensor` as a DLManagedTensor, without copying its bytes: a CPU tensor (placed by load())
/// as kDLCPU, a CUDA tensor as kDLCUDA with its ordinal. `data` points at the first element
/// (byte_offset 0, as torch exports), shape and strides (in elements) are the tensor's. The
/// result holds the bytes (Tensor::hold_bytes): they stay valid after the Checkpoint is gone and
/// after Checkpoint::to() moves the storage (the export keeps showing the bytes it was made
/// from), until its consumer calls its deleter, exactly once, which releases that hold. The
/// result is new and the caller owns it (never nullptr): hand it to one consumer, or call its
/// deleter; its shape and strides arrays live as long as it does. The bytes are read-only (on
/// the CPU, a view of the mapped file unless loaded with copy_cpu_storages). Throws
/// UnsupportedError(kDlpackUnsupportedTensor) for a tensor DLPack cannot describe (a dtype
/// dlpack_dtype refuses, a sparse or nested layout, a tensor without storage or on meta) or
/// that is not placed (open() reads no data); std::bad_alloc.
[[nodiscard]] PTHLOAD_API DLManagedTensor* to_dlpack(const Tensor& tensor);

}  // namespace pthload
