// Checkpoint::to(): every storage of a loaded checkpoint moved to one device, CPU↔CUDA or
// between GPUs, all or nothing: the new placements are made first and swapped in at the end.
#include <fmt/format.h>

#include <cstring>

#include "checkpoint/access.hpp"
#include "checkpoint/byte_holds.hpp"
#include "checkpoint/state.hpp"
#include "common/assert.hpp"
#include "common/check.hpp"
#include "device/cpu/placement.hpp"
#include "device/device_check.hpp"
#include "device/pipeline.hpp"
#include "device/place.hpp"
#include "pthload/error.hpp"

namespace pthload {
namespace device {
namespace {

int device_index(const internal::StorageState& storage) {
  return storage.device.index < 0 ? 0 : storage.device.index;
}

bool on_cuda(const internal::StorageState& storage) {
  return std::holds_alternative<std::unique_ptr<internal::DeviceMemory>>(storage.placement);
}

// Copies of the CUDA storages' bytes in host memory (one stream per source device).
std::vector<common::AlignedBuffer> copy_to_host(
    const std::vector<internal::StorageState*>& storages, Backend& backend) {
  std::vector<common::AlignedBuffer> copies;
  copies.reserve(storages.size());
  std::map<int, StreamHandle> streams;
  try {
    for (const auto* storage : storages) {
      const int device = device_index(*storage);
      backend.use_device(device);
      auto& stream = streams[device];
      if (stream == nullptr) stream = backend.create_stream(device);
      auto& copy = copies.emplace_back(storage->nbytes);
      const void* source =
          std::get<std::unique_ptr<internal::DeviceMemory>>(storage->placement)->pointer();
      if (storage->nbytes > 0) backend.copy_to_host(copy.data(), source, storage->nbytes, stream);
    }
  } catch (...) {
    for (const auto& [device, stream] : streams)
      backend.destroy_stream(stream);
    throw;
  }
  for (const auto& [device, stream] : streams)
    backend.destroy_stream(stream);
  return copies;
}

}  // namespace

void move_storages(Checkpoint& checkpoint, Device device, const CudaOptions& options,
                   const std::shared_ptr<Backend>& backend) {
  auto& state = internal::Access::state(checkpoint);
  // Placing after open() would take kSkipStorage as map_location's answer for every storage and
  // drop every tensor; a move has no storage to skip.
  if (device == kSkipStorage) {
    throw UnsupportedError(Errc::kDeviceUnsupportedType,
                           "Checkpoint::to: kSkipStorage is map_location's answer, not a device to "
                           "move storages to");
  }
  device = checked_device(device, [] { return std::string("Checkpoint::to"); });
  const bool unplaced = std::any_of(state.storages.begin(), state.storages.end(),
                                    [](const auto& s) { return !s->is_placed(); });
  if (unplaced) {
    // After open(): placing is loading, with what open() was asked (CRC checks, a
    // floating_dtype, copies) as load() would have placed them.
    LoadOptions load_options = state.open_options;
    load_options.map_location = map_to(device);
    load_options.cuda = options;
    place_storages(checkpoint, load_options, backend);
    return;
  }
  if (device.type == Device::Type::kMeta) {
    throw UnsupportedError(Errc::kDeviceUnsupportedType,
                           "Checkpoint::to: moving storages to 'meta' would drop their bytes");
  }
  // A meta storage has no bytes to move (torch: "Cannot copy out of meta tensor; no data!").
  // Checked before anything moves, so the move stays all or nothing.
  for (const auto& storage : state.storages) {
    if (std::holds_alternative<internal::MetaPlacement>(
            internal::Access::state(*storage).placement)) {
      throw UnsupportedError(
          Errc::kDeviceUnsupportedType,
          fmt::format("Checkpoint::to('{}'): storage '{}' is on meta and has no bytes to move; "
                      "load the checkpoint again with another map_location",
                      device.to_string(), storage->key()));
    }
  }
  if (device.type == Device::Type::kCuda) {
    const int count = backend ? backend->device_count() : 0;
    if (device.index < 0 && count > 0) device.index = backend->current_device();
    if (device.index >= count || count == 0) {
      throw DeviceError(count == 0 ? Errc::kDeviceCudaUnavailable : Errc::kDeviceOrdinalOutOfRange,
                        fmt::format("Checkpoint::to('{}'): this machine has {} CUDA device{}",
                                    device.to_string(), count, count == 1 ? "" : "s"));
    }
  }
  // Storages on a GPU other than the target come through the host first.
  std::vector<internal::StorageState*> from_cuda;
  for (const auto& storage : state.storages) {
    auto& s = internal::Access::state(*storage);
    if (!on_cuda(s)) continue;
    if (device.type == Device::Type::kCuda && device_index(s) == device.index) continue;
    from_cuda.push_back(&s);
  }
  std::vector<common::AlignedBuffer> host_copies;
  if (!from_cuda.empty()) {
    run_on_own_thread([&] { host_copies = copy_to_host(from_cuda, *backend); });
  }

  if (device.type == Device::Type::kCpu) {
    for (std::size_t i = 0; i < from_cuda.size(); ++i) {
      auto& s = *from_cuda[i];
      internal::replace_placement(s, std::move(host_copies[i]));
      s.cpu_bytes = std::get<common::AlignedBuffer>(s.placement).span().first(s.nbytes);
      s.device = Device::cpu();
    }
    return;
  }

  std::vector<DeviceJob> jobs;
  std::vector<internal::StorageState*> moved;
  std::uint64_t total = 0;
  // CPU storages that are file views lie in view_bytes() (an io=map image's mapping).
  const auto file = state.file ? state.file->view_bytes() : std::span<const std::byte>();
  std::size_t next_copy = 0;
  for (const auto& storage : state.storages) {
    auto& s = internal::Access::state(*storage);
    PTHLOAD_ASSERT(!std::holds_alternative<internal::MetaPlacement>(s.placement));
    if (on_cuda(s) && device_index(s) == device.index) continue;
    // CPU bytes are already in host byte order; host copies of CUDA storages too.
    const std::span<const std::byte> bytes =
        on_cuda(s) ? host_copies[next_copy++].span().first(s.nbytes) : s.cpu_bytes;
    const bool file_view = std::holds_alternative<internal::FileView>(s.placement) &&
                           !file.empty() && bytes.data() >= file.data() &&
                           bytes.data() + bytes.size() <= file.data() + file.size();
    jobs.push_back({.storage = &s,
                    .device = device.index,
                    .source = bytes,
                    .file = file_view ? file : std::span<const std::byte>(),
                    .reader = file_view ? state.file.get() : nullptr,
                    .swap_unit = 1,
                    .alignment = view_alignment(s)});
    moved.push_back(&s);
    total += s.nbytes;
  }
  Progress progress(options.progress, total);
  auto placed = place_on_devices(backend, jobs, options, progress);
  for (std::size_t i = 0; i < moved.size(); ++i) {
    internal::replace_placement(*moved[i], std::move(placed[i]));
    moved[i]->device = Device::cuda(device.index);
    moved[i]->cpu_bytes = {};
  }
}

}  // namespace device

void Checkpoint::to(Device device, const CudaOptions& options) {
  common::with_context({.path = state_->path}, [&] {
    device::move_storages(*this, device, options, device::cuda_backend());
  });
}

}  // namespace pthload
