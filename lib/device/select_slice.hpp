// load_slice() on a given backend: the public load_slice (pthload/slice.hpp) uses the CUDA
// backend; tests place slices through the host backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "device/backend.hpp"
#include "pthload/slice.hpp"

namespace pthload::device {

/// load_slice() with CUDA devices reached through `backend` (nullptr: none exists).
[[nodiscard]] Tensor load_slice(const Checkpoint& checkpoint, std::string_view name, int dim,
                                std::int64_t begin, std::int64_t end, Device device,
                                const CudaOptions& cuda, const std::shared_ptr<Backend>& backend);

}  // namespace pthload::device
