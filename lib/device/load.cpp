// place_storages(): decide every storage's device (map_location or its tag), check
// that those devices exist, then place the storages in file order (one pass over the file).
#include <fmt/format.h>

#include <algorithm>
#include <new>
#include <set>
#include <unordered_set>

#include "checkpoint/access.hpp"
#include "checkpoint/select.hpp"
#include "checkpoint/state.hpp"
#include "common/check.hpp"
#include "common/fresh_memory.hpp"
#include "common/phase_marks.hpp"
#include "common/prefetch.hpp"
#include "device/backend.hpp"
#include "device/convert.hpp"
#include "device/cpu/file_copies.hpp"
#include "device/cpu/packed_copies.hpp"
#include "device/cpu/placement.hpp"
#include "device/device_check.hpp"
#include "device/pipeline.hpp"
#include "device/place.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"

namespace pthload {
namespace {

struct Resolved {
  Device device;
  bool from_map_location;  // false: from the storage's own tag
};

// map_location's choice for `info`, else the device its tag names. `subject()` begins the error
// when neither can place it ("storage '0' is tagged 'xla:0'"); a callable, so the success path
// formats nothing.
template <typename Subject>
Resolved choose_device(const StorageInfo& info, const LoadOptions& options, Subject&& subject) {
  if (options.map_location) {
    if (const auto chosen = options.map_location(info, info.location)) {
      if (*chosen == kSkipStorage) return {*chosen, true};
      // A callable may answer any Device value; one outside the enum would be placed nowhere.
      return {device::checked_device(
                  *chosen, [&] { return fmt::format("{}, and map_location answered", subject()); }),
              true};
    }
  }
  try {
    return {default_device_for(info.location), false};
  } catch (Error& e) {
    throw UnsupportedError(e.code(), fmt::format("{}, which pthload cannot place: {}; pass "
                                                 "map_location \"cpu\" to load it onto the CPU",
                                                 subject(), e.message()));
  }
}

Resolved resolve_device(const internal::StorageState& storage, const LoadOptions& options) {
  if (!storage.follows_map_location) return {Device::cpu(), false};
  const StorageInfo info{.key = storage.key,
                         .location = storage.location,
                         .dtype = storage.dtype,
                         .numel = storage.numel,
                         .nbytes = storage.nbytes};
  return choose_device(info, options, [&] {
    return fmt::format("storage '{}' is tagged '{}'", storage.key, storage.location);
  });
}

// A wrapper subclass has no storage, but its device goes through map_location as torch's
// _get_restore_location sends it (docs/format.md §7): a dict renames it, a device replaces it, and
// a callable — which torch refuses here — is asked with the tensor's geometry as a storage of no
// bytes.
void resolve_wrapper_devices(internal::CheckpointState& checkpoint, const LoadOptions& options) {
  // A pass over 100 000 tensors that finds none cost 2 ms of placing them as views.
  if (checkpoint.no_wrapper_subclasses) return;
  std::unordered_set<const Tensor*> skipped;
  // Not a structured binding: clang 14 cannot capture one in the lambda below.
  for (auto& named : checkpoint.tensors) {
    Tensor& tensor = named.tensor;
    if (!internal::Access::has_extras(tensor)) continue;
    const WrapperSubclass* wrapper = tensor.wrapper_subclass();
    if (wrapper == nullptr) continue;
    const StorageInfo info{.key = "",
                           .location = wrapper->location,
                           .dtype = tensor.dtype(),
                           .numel = tensor.numel(),
                           .nbytes = 0};
    const auto subject = [&] {
      return fmt::format("tensor '{}' ({}) is on '{}'", named.name, wrapper->subclass,
                         wrapper->location);
    };
    const Device device = choose_device(info, options, subject).device;
    if (device == kSkipStorage) {
      skipped.insert(&tensor);
      continue;
    }
    auto placed = std::make_shared<WrapperSubclass>(*wrapper);
    placed->device = device;
    internal::Access::set_wrapper_subclass(tensor, std::move(placed), tensor.storage_offset());
  }
  // Not a pass over every tensor for nothing: a checkpoint has no wrapper subclass, most often.
  if (skipped.empty()) return;
  std::erase_if(checkpoint.tensors,
                [&](const NamedTensor& named) { return skipped.contains(&named.tensor); });
}

// A storage's device and place in the file, read in the pass that decides the device: sorting
// by offsets read again from 100 000 storages and their records was a pass of cache misses.
struct Planned {
  internal::StorageState* storage;
  Device device;
  std::uint64_t file_offset;
};

// Tells the device layer's errors which storage and record they are about; memory that runs out
// placing it becomes an OutOfMemoryError saying what and how much.
template <typename Body>
void about(const internal::StorageState& storage, const Device& device, Body&& body) {
  try {
    body();
  } catch (Error& e) {
    if (e.context().record.empty() && storage.record != nullptr) {
      e.context().record = std::string(storage.record->name);
    }
    throw;
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(
        Errc::kOutOfMemory,
        fmt::format("out of memory placing storage '{}' ({} bytes) on {}", storage.key,
                    storage.nbytes, device.to_string()),
        {.record = storage.record != nullptr ? std::string(storage.record->name) : std::string()});
  }
}

}  // namespace

namespace device {

void place_storages(Checkpoint& checkpoint, const LoadOptions& options,
                    const std::shared_ptr<Backend>& backend, PipelineReport* report,
                    ViewsPlaced views) {
  auto& state = internal::Access::state(checkpoint);
  return common::with_context({.path = state.path}, [&] {
    // The index and pickle were read at open(); a file written or truncated since would mix
    // them with other bytes, and views of a truncated mapping would raise SIGBUS later.
    if (state.file) state.file->check_unchanged();
    // A bad option fails before any byte moves, not after every storage was placed.
    if (options.floating_dtype) check_floating_dtype(*options.floating_dtype);
    // Every device is decided and checked before any byte moves: a bad tag fails in
    // milliseconds, not after gigabytes were copied.
    // 2.4 MB for 100 000 storages: a mapping of its own (common/fresh_memory.hpp).
    std::vector<Planned, common::LargeArrayAllocator<Planned>> plan;
    int cuda_devices = -1;
    std::uint64_t total_bytes = 0;
    std::unordered_set<const Storage*> skipped;  // map_location answered kSkipStorage
    // Owned copies of small storages are pieces of one block (cpu/packed_copies.hpp).
    cpu::PackedCopies packed;
    // Views made as their devices are decided (ViewsPlaced::kAsDecided) need no plan: a view
    // load of 100 000 storages then makes none (2.4 MB) and reads each storage once. Not when
    // every record read is to be CRC-checked first.
    const bool view_now = views == ViewsPlaced::kAsDecided && !options.copy_cpu_storages &&
                          !(options.verify_crc && state.archive);
    std::uint64_t viewed_bytes = 0;
    for (std::size_t i = 0; i < state.storages.size(); ++i) {
      const auto& storage = state.storages[i];
      if (i + common::kPrefetchAhead < state.storages.size()) {
        internal::Access::prefetch_whole_state(*state.storages[i + common::kPrefetchAhead]);
      }
      auto& storage_state = internal::Access::state(*storage);
      auto [device, from_map_location] = resolve_device(storage_state, options);
      if (device == kSkipStorage) {
        skipped.insert(storage.get());
        continue;
      }
      if (device.type == Device::Type::kCuda && cuda_devices < 0) {
        cuda_devices = backend ? backend->device_count() : 0;
      }
      device::check_device_exists(storage_state, device, from_map_location, cuda_devices);
      // torch's bare "cuda" is the caller's current device; pthload's threads have their own.
      if (device.type == Device::Type::kCuda && device.index < 0 && backend) {
        device.index = backend->current_device();
      }
      if (device.type != Device::Type::kMeta) total_bytes += storage_state.nbytes;
      if (device.type == Device::Type::kCpu && options.copy_cpu_storages) {
        packed.expect(storage_state.nbytes);
      }
      if (view_now && device.type == Device::Type::kCpu) {
        bool viewed = false;
        about(storage_state, device, [&] { viewed = place_view_on_cpu(state, storage_state); });
        if (viewed) {
          viewed_bytes += storage_state.nbytes;
          continue;
        }
      }
      if (plan.capacity() == 0) plan.reserve(state.storages.size() - i);
      plan.push_back({&storage_state, device, internal::file_offset(storage_state)});
    }
    state.placed_bytes += viewed_bytes;
    resolve_wrapper_devices(state, options);
    // The plan holds only kept storages: dropping the skipped ones (and their tensors) frees
    // nothing the plan points at.
    internal::drop_storages(state, skipped);
    // File order: one forward pass over the file. torch usually writes storages in the order the
    // pickle meets them, so the plan is often sorted already.
    const auto by_offset = [](const Planned& a, const Planned& b) {
      return a.file_offset < b.file_offset;
    };
    if (!std::is_sorted(plan.begin(), plan.end(), by_offset)) {
      std::sort(plan.begin(), plan.end(), by_offset);
    }
    // LoadOptions::verify_crc: the records of the storages that are read (open() checked the
    // others), each a chunk at a time with pread, before any is placed.
    if (options.verify_crc && state.archive) {
      for (const auto& planned : plan) {
        const zip::Entry* record = planned.storage->record;
        if (record != nullptr && planned.device.type != Device::Type::kMeta) {
          state.archive->verify_crc(*record);
        }
      }
    }
    // CUDA options that cannot serve this plan fail here too, not after the CPU copies.
    std::set<int> gpus;
    for (const auto& planned : plan)
      if (planned.device.type == Device::Type::kCuda) gpus.insert(planned.device.index);
    if (!gpus.empty()) check_cuda_options(options.cuda, gpus.size());
    Progress progress(options.cuda.progress, total_bytes);
    if (viewed_bytes > 0) progress.add(viewed_bytes);
    std::vector<DeviceJob> jobs;
    std::vector<internal::StorageState*> job_storages;
    std::vector<common::AlignedBuffer> scratch;  // inflated records, alive while they are copied
    cpu::FileCopyList cpu_copies;
    // Every storage a copy: 6 MB of copies for 100 000, grown by doubling they cost twice that.
    if (options.copy_cpu_storages) cpu_copies.reserve(plan.size());
    std::uint64_t cpu_copy_bytes = 0;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const Planned& planned = plan[i];
      if (i + common::kPrefetchAhead < plan.size()) {
        common::prefetch_lines(plan[i + common::kPrefetchAhead].storage,
                               sizeof(internal::StorageState));
      }
      // Half as far ahead, the state asked for then is there: its record's entry next.
      if (i + common::kPrefetchAhead / 2 < plan.size()) {
        common::prefetch(plan[i + common::kPrefetchAhead / 2].storage->record);
      }
      // Named, not a structured binding: clang 14 (the fuzz build) refuses to capture those.
      internal::StorageState* const storage_state = planned.storage;
      const Device device = planned.device;
      about(*storage_state, device, [&] {
        switch (device.type) {
          case Device::Type::kCpu:
            // Plain copies from the file are read below, by several threads.
            if (!place_on_cpu(state, *storage_state, options.copy_cpu_storages, &cpu_copies,
                              &packed)) {
              progress.add(storage_state->nbytes);
            } else {
              cpu_copy_bytes += storage_state->nbytes;
            }
            state.placed_bytes += storage_state->nbytes;
            return;
          case Device::Type::kMeta:
            // torch makes an empty storage of the same size on meta: no byte is read.
            storage_state->placement = internal::MetaPlacement{};
            storage_state->device = device;
            return;
          case Device::Type::kCuda: {
            common::AlignedBuffer buffer;
            const auto bytes = stored_bytes(state, *storage_state, buffer);
            const auto file = state.file ? state.file->bytes() : std::span<const std::byte>();
            const bool in_file = !file.empty() && bytes.data() >= file.data() &&
                                 bytes.data() + bytes.size() <= file.data() + file.size();
            // Staging reads go through the storage's file (pread where it is one).
            const common::MappedFile* reader =
                buffer.size() > 0 ? nullptr : &storage_file(state, *storage_state);
            if (buffer.size() > 0) scratch.push_back(std::move(buffer));
            jobs.push_back({.storage = storage_state,
                            .device = device.index,
                            .source = bytes,
                            .file = in_file ? file : std::span<const std::byte>(),
                            .reader = reader,
                            .swap_unit = storage_state->swap_unit,
                            .alignment = view_alignment(*storage_state)});
            job_storages.push_back(storage_state);
            state.placed_bytes += storage_state->nbytes;
            return;
          }
        }
      });
    }
    cpu::read_copies(cpu_copies, cpu::copy_threads_for(cpu_copy_bytes, options.copy_threads),
                     progress);
    if (!jobs.empty()) {
      auto placed = place_on_devices(backend, jobs, options.cuda, progress, report);
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        job_storages[i]->placement = std::move(placed[i]);
        job_storages[i]->device = Device::cuda(jobs[i].device);
        job_storages[i]->cpu_bytes = {};
      }
    }
    if (options.floating_dtype) convert_storages(checkpoint, *options.floating_dtype, backend);
  });
}

}  // namespace device

}  // namespace pthload
