// Storages that no listed tensor uses: what a file holds beyond its tensors (a storage pickled on
// its own), or the symptom of a tensor that was not listed (docs/naming.md, "The invariant").
#pragma once

#include "checkpoint/state.hpp"

namespace pthload::internal {

/// Fills checkpoint.unused_storages: every Storage of checkpoint.storages and, in a zip archive,
/// every record under `<top>/data/` (and `<top>/constants/` of a TorchScript archive) that none
/// of checkpoint.tensors uses — directly, as a quantized tensor's per-channel parameters, as a
/// part of a sparse or nested tensor, or as a nested tensor's metadata. In the order storages
/// and records appear.
void record_unused_storages(internal::CheckpointState& checkpoint);

}  // namespace pthload::internal
