// Loads through the device pipeline on the host backend (device/host_backend.hpp), as load() does
// with the CUDA backend, and the check that such a load left nothing behind on it.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <memory>

#include "device/host_backend.hpp"
#include "device/pipeline.hpp"
#include "device/place.hpp"
#include "pthload/checkpoint.hpp"

namespace pthload::test {

[[nodiscard]] inline Checkpoint load_on(const std::shared_ptr<device::HostBackend>& backend,
                                        const std::filesystem::path& path,
                                        const LoadOptions& options,
                                        device::PipelineReport* report = nullptr) {
  auto checkpoint = open(path, options);
  device::place_storages(checkpoint, options, backend, report);
  return checkpoint;
}

/// Every device allocation, staging buffer, stream and event of `backend` is released.
inline void check_nothing_left(const device::HostBackend& backend) {
  const auto counts = backend.counts();
  CHECK(counts.device_allocations == 0);
  CHECK(counts.staging_allocations == 0);
  CHECK(counts.streams == 0);
  CHECK(counts.events == 0);
}

}  // namespace pthload::test
