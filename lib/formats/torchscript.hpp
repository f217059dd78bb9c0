// TorchScript archives (torch.jit.save): the second pickle, constants.pkl (docs/format.md §1.5).
#pragma once

#include <string>

#include "checkpoint/state.hpp"
#include "pthload/options.hpp"
#include "zip/archive.hpp"

namespace pthload::formats {

/// Reads `constants_pickle` (`<top>/constants.pkl`: a tuple of the tensors the archive's code
/// uses as constants, storages under `<top>/constants/`) and appends its tensors to
/// checkpoint.tensors as `CONSTANTS.c<index>`, as the archive's code calls them. Its value tree is
/// dropped afterwards: nothing of it outlives the tensors, which own their names and share their
/// storages. Throws as open().
void read_torchscript_constants(internal::CheckpointState& checkpoint,
                                const zip::Entry& constants_pickle, const std::string& prefix,
                                const LoadOptions& options);

}  // namespace pthload::formats
