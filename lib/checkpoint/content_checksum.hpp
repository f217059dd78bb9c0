// Tensor::content_checksum() through a read window the caller keeps, so that
// content_checksums() reads every large view of the file through one buffer. A fresh 4 MiB
// buffer for each tensor of a 0.95 GB checkpoint made 340 MiB of fresh memory ready, which took
// longer than reading and hashing the file.
#pragma once

#include <cstdint>

#include "common/aligned_buffer.hpp"
#include "pthload/tensor.hpp"

namespace pthload::internal {

/// Tensor::content_checksum() of `tensor`; a view of the file is read through `window`, grown
/// as it needs and left for the next call. Throws as content_checksum().
[[nodiscard]] std::uint64_t content_checksum(const Tensor& tensor, common::AlignedBuffer& window);

}  // namespace pthload::internal
