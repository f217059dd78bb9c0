// CPU placement. torch pads every record to 64 bytes, so views are the normal case; records from
// other zip writers, and legacy storages (packed one after another behind 8-byte counts), may
// sit at any offset: they are views when their address suits the element type, else copies.
#include "device/cpu/placement.hpp"

#include <algorithm>
#include <string_view>

#include "device/cpu/kernels.hpp"
#include "zip/entry.hpp"

namespace pthload::device {
namespace {

// The file a storage's bytes are in: the checkpoint's, or a nested legacy stream's.
const std::shared_ptr<const common::MappedFile>& source_file(
    const internal::CheckpointState& checkpoint, const internal::StorageState& storage) {
  if (storage.file_range && storage.file_range->file) return storage.file_range->file;
  return checkpoint.file;
}

std::string_view record_name(const internal::StorageState& storage) noexcept {
  return storage.record != nullptr ? storage.record->name : std::string_view();
}

// The bytes of a zip record's local header before its data: what lies between two adjacent
// records' data besides a data descriptor.
std::size_t header_bytes(const internal::StorageState& storage) noexcept {
  if (storage.record == nullptr) return cpu::FileCopy::kNoHeader;
  return static_cast<std::size_t>(storage.record->data_offset -
                                  storage.record->local_header_offset);
}

// An owned copy of `view`, bytes of `file`, read with pread where `file` is a file: a file that
// shrank under the load gives IoError here instead of SIGBUS in a memcpy from the mapping.
common::AlignedBuffer owned_copy(const common::MappedFile& file, std::span<const std::byte> view,
                                 const internal::StorageState& storage) {
  common::AlignedBuffer buffer(view.size());
  file.copy_out(view, buffer.span().first(view.size()), record_name(storage));
  return buffer;
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

const common::MappedFile& storage_file(const internal::CheckpointState& checkpoint,
                                       const internal::StorageState& storage) {
  return *source_file(checkpoint, storage);
}

std::size_t view_alignment(const internal::StorageState& storage) noexcept {
  // Enough for every element type up to complex128; an untyped (uint8) storage may hold any
  // dtype (_rebuild_tensor_v3), so it gets the largest.
  constexpr std::size_t kMaxAlignment = 16;
  if (storage.dtype == Dtype::kUInt8) return kMaxAlignment;
  return std::min(element_size(storage.dtype), kMaxAlignment);
}

namespace {

// Makes `storage` a view of `view`, its bytes where they lie in its file, where its elements'
// alignment and the file allow; false, changing nothing, otherwise.
bool place_as_view(const internal::CheckpointState& checkpoint, internal::StorageState& storage,
                   std::span<const std::byte> view) {
  if (storage.swap_unit > 1 ||
      reinterpret_cast<std::uintptr_t>(view.data()) % view_alignment(storage) != 0) {
    return false;
  }
  // An io=read image's storage bytes may never have been read: view_of refuses them, and
  // they are copied out. Under io=map they are views of the file's mapping.
  const auto& file = source_file(checkpoint, storage);
  const auto viewable = file->view_of(view);
  if (!viewable) return false;
  storage.placement = internal::FileView{.file = file, .record = record_name(storage)};
  storage.cpu_bytes = *viewable;
  storage.device = Device::cpu();
  return true;
}

}  // namespace

bool place_view_on_cpu(const internal::CheckpointState& checkpoint,
                       internal::StorageState& storage) {
  // A deflated record is inflated into a buffer: never a view.
  if (storage.record != nullptr && storage.record->method != zip::kMethodStored) return false;
  const auto bytes = read_record(checkpoint, storage);
  const auto* view = std::get_if<std::span<const std::byte>>(&bytes);
  return view != nullptr && place_as_view(checkpoint, storage, *view);
}

bool place_on_cpu(const internal::CheckpointState& checkpoint, internal::StorageState& storage,
                  bool copy, cpu::FileCopyList* deferred, cpu::PackedCopies* packed) {
  auto bytes = read_record(checkpoint, storage);
  const bool swap = storage.swap_unit > 1;
  if (auto* view = std::get_if<std::span<const std::byte>>(&bytes)) {
    if (!copy && place_as_view(checkpoint, storage, *view)) return false;
    const auto& file = *source_file(checkpoint, storage);
    if (deferred != nullptr && !swap) {
      std::span<std::byte> destination =
          packed != nullptr ? packed->take(view->size()) : std::span<std::byte>();
      const bool in_block = !destination.empty();
      common::AlignedBuffer buffer;
      if (!in_block) {
        // Filled by the copy workers (cpu/file_copies.cpp).
        buffer = common::AlignedBuffer(view->size());
        destination = buffer.span().first(view->size());
      }
      deferred->push_back({.file = &file,
                           .source = *view,
                           .destination = destination,
                           .record = record_name(storage),
                           .header_bytes = header_bytes(storage)});
      if (in_block) {
        storage.placement = internal::PackedCopy{packed->block()};
      } else {
        storage.placement = std::move(buffer);
      }
      storage.cpu_bytes = destination.first(static_cast<std::size_t>(storage.nbytes));
      storage.device = Device::cpu();
      return true;
    }
    bytes = owned_copy(file, *view, storage);
  }
  auto& buffer = std::get<common::AlignedBuffer>(bytes);
  if (swap) cpu::byteswap(buffer.span().first(storage.nbytes), storage.swap_unit);
  storage.placement = std::move(buffer);
  storage.cpu_bytes =
      std::get<common::AlignedBuffer>(storage.placement).span().first(storage.nbytes);
  storage.device = Device::cpu();
  return false;
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
