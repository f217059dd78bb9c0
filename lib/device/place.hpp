// Placing the storages of an opened checkpoint: what load() does after open().
#pragma once

#include "pthload/checkpoint.hpp"

namespace pthload::device {

/// Decides every storage's device (options.map_location, else its tag), checks that each device
/// exists, then places the storages in file order. Throws as load().
void place_storages(Checkpoint& checkpoint, const LoadOptions& options);

}  // namespace pthload::device
