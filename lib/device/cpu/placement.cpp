// CPU placement. torch pads every record to 64 bytes, so views are the normal case; records from
// other zip writers, and legacy storages (packed one after another behind 8-byte counts), may
// sit at any offset: they are views when their address suits the element type, else copies.
#include "device/cpu/placement.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "device/cpu/kernels.hpp"

namespace pthload::device {
namespace {

// Asks the kernel to map a large source range in one call: faulting a 1 GB record in 4 KiB at a
// time costs more than copying it. Advice only; older kernels refuse MADV_POPULATE_READ.
void prefault(std::span<const std::byte> bytes) {
#ifdef MADV_POPULATE_READ
  constexpr std::size_t kWorthIt = std::size_t{1} << 20;
  if (bytes.size() < kWorthIt) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data()) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(bytes.data()) + bytes.size();
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)bytes;
#endif
}

common::AlignedBuffer owned_copy(std::span<const std::byte> bytes) {
  prefault(bytes);
  common::AlignedBuffer buffer(bytes.size());
  if (!bytes.empty()) std::memcpy(buffer.data(), bytes.data(), bytes.size());
  return buffer;
}

// The file a storage's bytes are in: the checkpoint's, or a nested legacy stream's.
const std::shared_ptr<const common::MappedFile>& source_file(
    const internal::CheckpointState& checkpoint, const internal::StorageState& storage) {
  if (storage.file_range && storage.file_range->file) return storage.file_range->file;
  return checkpoint.file;
}

// The record's bytes trimmed to the storage, either still in the file (a view) or owned.
std::variant<std::span<const std::byte>, common::AlignedBuffer> read_record(
    const internal::CheckpointState& checkpoint, const internal::StorageState& storage) {
  if (storage.record == nullptr) {
    // A legacy storage: its range was checked against its file when the stream was parsed.
    const auto offset = storage.file_range ? storage.file_range->offset : 0;
    return source_file(checkpoint, storage)
        ->bytes()
        .subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(storage.nbytes));
  }
  auto record = checkpoint.archive->read(*storage.record);
  if (record.is_view()) return record.bytes().first(storage.nbytes);
  return std::move(record).take_buffer();
}

}  // namespace

std::size_t view_alignment(const internal::StorageState& storage) noexcept {
  // Enough for every element type up to complex128; an untyped (uint8) storage may hold any
  // dtype (_rebuild_tensor_v3), so it gets the largest.
  constexpr std::size_t kMaxAlignment = 16;
  if (storage.dtype == Dtype::kUInt8) return kMaxAlignment;
  return std::min(element_size(storage.dtype), kMaxAlignment);
}

void place_on_cpu(const internal::CheckpointState& checkpoint, internal::StorageState& storage,
                  bool copy) {
  auto bytes = read_record(checkpoint, storage);
  const bool swap = storage.swap_unit > 1;
  if (auto* view = std::get_if<std::span<const std::byte>>(&bytes)) {
    const bool aligned =
        reinterpret_cast<std::uintptr_t>(view->data()) % view_alignment(storage) == 0;
    if (!copy && !swap && aligned) {
      storage.placement = internal::FileView{source_file(checkpoint, storage)};
      storage.cpu_bytes = *view;
      storage.device = Device::cpu();
      return;
    }
    bytes = owned_copy(*view);
  }
  auto& buffer = std::get<common::AlignedBuffer>(bytes);
  if (swap) cpu::byteswap(buffer.span().first(storage.nbytes), storage.swap_unit);
  storage.placement = std::move(buffer);
  storage.cpu_bytes =
      std::get<common::AlignedBuffer>(storage.placement).span().first(storage.nbytes);
  storage.device = Device::cpu();
}

std::span<const std::byte> stored_bytes(const internal::CheckpointState& checkpoint,
                                        const internal::StorageState& storage,
                                        common::AlignedBuffer& scratch) {
  auto bytes = read_record(checkpoint, storage);
  if (auto* view = std::get_if<std::span<const std::byte>>(&bytes)) return *view;
  scratch = std::move(std::get<common::AlignedBuffer>(bytes));
  return scratch.span().first(storage.nbytes);
}

}  // namespace pthload::device
