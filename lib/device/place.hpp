// Placing the storages of an opened checkpoint: what load() does after open(), and what
// Checkpoint::to() does afterwards.
#pragma once

#include <memory>

#include "device/backend.hpp"
#include "device/pipeline.hpp"
#include "pthload/checkpoint.hpp"

namespace pthload::device {

/// Decides every storage's device (options.map_location, else its tag), checks that each device
/// exists on `backend` (nullptr: none does), then places the storages: CPU ones in file order,
/// those bound for CUDA devices through the pipeline on `backend`. Throws as load(); on failure
/// no device memory the call allocated stays allocated. `report`, when given, says how the
/// pipeline laid the device storages out.
void place_storages(Checkpoint& checkpoint, const LoadOptions& options,
                    const std::shared_ptr<Backend>& backend = cuda_backend(),
                    PipelineReport* report = nullptr);

/// Moves every placed storage of `checkpoint` to `device` through `backend` (CPU↔CUDA, or
/// between CUDA devices). All or nothing: on failure every storage stays where it was.
void move_storages(Checkpoint& checkpoint, Device device, const CudaOptions& options,
                   const std::shared_ptr<Backend>& backend);

}  // namespace pthload::device
