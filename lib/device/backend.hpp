// The device backends load() places storages with: the CPU always, CUDA when built with it.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "torch/state.hpp"

namespace pthload::device {

/// Copies `bytes` into new memory on CUDA device `index` (-1: the current device). Throws
/// DeviceError (kDeviceCudaUnavailable in a build without CUDA, kDeviceAllocationFailed,
/// kDeviceCopyFailed) with CUDA's own message.
[[nodiscard]] std::unique_ptr<detail::DeviceMemory> copy_to_cuda(std::span<const std::byte> bytes,
                                                                 int index);

/// Whether this build was made with CUDA support.
[[nodiscard]] bool built_with_cuda() noexcept;

}  // namespace pthload::device
