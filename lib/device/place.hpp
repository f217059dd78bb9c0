// Placing the storages of an opened checkpoint: what load() does after open(), and what
// Checkpoint::to() does afterwards.
#pragma once

#include <memory>

#include "device/backend.hpp"
#include "device/pipeline.hpp"
#include "pthload/checkpoint.hpp"

namespace pthload::device {

/// When a storage that stays on the CPU as a view of the file is placed.
enum class ViewsPlaced {
  /// After every storage's device is decided and checked, like every other storage: a
  /// failure to decide one leaves every storage as it was.
  kAfterDecisions,
  /// As its device is decided. A view reads no byte of the file, and this saves a second pass
  /// over every storage (a cache miss each: 2-3 ms for 100 000); but a decision that fails
  /// leaves the views made before it. For a caller that drops the checkpoint on failure (load()).
  kAsDecided,
};

/// Decides every storage's device (options.map_location, else its tag), checks that each device
/// exists on `backend` (nullptr: none does), then places the storages: CPU ones in file order,
/// those bound for CUDA devices through the pipeline on `backend` (views of the file as
/// `views` says). Throws as load(); on failure no device memory the call allocated stays
/// allocated. `report`, when given, says how the pipeline laid the device storages out.
void place_storages(Checkpoint& checkpoint, const LoadOptions& options,
                    const std::shared_ptr<Backend>& backend = cuda_backend(),
                    PipelineReport* report = nullptr,
                    ViewsPlaced views = ViewsPlaced::kAfterDecisions);

/// Moves every placed storage of `checkpoint` to `device` through `backend` (CPU↔CUDA, or
/// between CUDA devices). All or nothing: on failure every storage stays where it was.
void move_storages(Checkpoint& checkpoint, Device device, const CudaOptions& options,
                   const std::shared_ptr<Backend>& backend);

}  // namespace pthload::device
