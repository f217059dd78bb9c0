// Holds on a storage's bytes (Tensor::hold_bytes, DLPack exports) that outlive Checkpoint::to():
// the placement a move replaces is handed to the live holds on its storage instead of being
// freed under a consumer that still reads it.
#pragma once

#include <memory>

#include "checkpoint/state.hpp"
#include "pthload/tensor.hpp"

namespace pthload::internal {

using Placement = decltype(StorageState::placement);

/// A hold on `storage`'s bytes as they are now: it keeps the storage alive and, once
/// replace_placement() moves the storage, owns the placement it had. Holds taken on the same
/// placement are copies of one. Thread-safe against other holds and against replace_placement().
[[nodiscard]] std::shared_ptr<const void> hold_placement(std::shared_ptr<const Storage> storage);

/// Gives `storage` the placement `replacement`. The one it had is destroyed here, unless a hold
/// on the storage lives: then that hold owns it until its last copy is gone.
void replace_placement(StorageState& storage, Placement replacement);

}  // namespace pthload::internal
