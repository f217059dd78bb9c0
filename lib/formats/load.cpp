// load(): open() a checkpoint (formats/open.cpp), then place its storages (device/).
#include <cstddef>
#include <filesystem>
#include <new>
#include <span>

#include "common/check.hpp"
#include "common/phase_marks.hpp"
#include "device/place.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"

namespace pthload {

Checkpoint load(const std::filesystem::path& path, const LoadOptions& options) {
  // What open() and place_storages() did not name: the path, the shard index, a thread.
  return common::with_context({.path = path.native()}, "loading", [&] {
    Checkpoint checkpoint = open(path, options);
    // A failure drops the checkpoint: views need not wait for every device to be decided.
    device::place_storages(checkpoint, options, device::cuda_backend(), nullptr,
                           device::ViewsPlaced::kAsDecided);
    common::phases::end("place the storages");
    return checkpoint;
  });
}

Checkpoint load(std::span<const std::byte> bytes, const LoadOptions& options) {
  return common::with_context({.path = "<memory>"}, "loading", [&] {
    Checkpoint checkpoint = open(bytes, options);
    device::place_storages(checkpoint, options, device::cuda_backend(), nullptr,
                           device::ViewsPlaced::kAsDecided);
    return checkpoint;
  });
}

}  // namespace pthload
