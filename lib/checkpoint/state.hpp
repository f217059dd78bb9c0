// What Storage and Checkpoint hold behind their public faces, shared by the torch layer (which
// builds them) and the device layer (which places storages).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/aligned_buffer.hpp"
#include "common/fresh_memory.hpp"
#include "common/mapped_file.hpp"
#include "common/short_text.hpp"
#include "pickle/machine.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/device.hpp"
#include "pthload/dtype.hpp"
#include "pthload/options.hpp"
#include "pthload/tensor.hpp"
#include "zip/archive.hpp"

namespace pthload::internal {

/// Device memory the device layer allocated (CUDA); the torch layer only holds it.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  [[nodiscard]] virtual const void* pointer() const noexcept = 0;
};

/// The bytes are a view of the mapped file, which this keeps mapped.
struct FileView {
  std::shared_ptr<const common::MappedFile> file;
  /// The zip record the bytes are (empty for a legacy range): a view of the central directory
  /// in `file`'s image, for the errors of reads of the view. Unlike StorageState::record, valid
  /// after the Checkpoint is gone, for as long as the view.
  std::string_view record;
};

/// A range of a file: where a legacy storage's bytes are.
struct FileRange {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  /// The file, when not the checkpoint's own: the bytes of a torch.storage._load_from_bytes
  /// call, a legacy stream nested in the pickle.
  std::shared_ptr<const common::MappedFile> file;
};

/// The bytes are an owned copy in a block shared with the other small storages one copy load
/// made (device/cpu/packed_copies.hpp), which this keeps.
struct PackedCopy {
  std::shared_ptr<const std::byte> block;
};

/// On the meta device a storage has a size and no bytes.
struct MetaPlacement {};

// A checkpoint of 100 000 tensors has 100 000 of these, and load() walks them several times
// (unused storages, devices, placement, teardown): each walk costs a cache miss per storage for
// every 64 bytes it reads. So the state is small, and what those walks read sits at its end,
// beside the Storage that points to it (Access::ConstructibleStorage puts it just after).
struct StorageState {
  common::ShortText key;
  common::ShortText location;
  /// In a legacy stream (which has no records), a safetensors file, a DCP item or a numpy array:
  /// the range of the file holding the bytes. Null for a zip record.
  std::unique_ptr<FileRange> file_range;
  std::variant<std::monostate, FileView, common::AlignedBuffer, PackedCopy,
               std::unique_ptr<DeviceMemory>, MetaPlacement>
      placement;
  /// The bytes, when placed on the CPU (a view of the file or of the owned buffer).
  std::span<const std::byte> cpu_bytes;
  std::uint64_t numel = 0;
  Device device = Device::cpu();
  Dtype dtype = Dtype::kUInt8;
  /// Multi-byte elements of a big-endian file need swapping in units of this many bytes.
  std::uint8_t swap_unit = 1;
  /// The bytes are held by the pickle itself (a numpy array's data), not by a storage record.
  bool in_pickle = false;
  /// Whether map_location decides the device. Not for a numpy array: torch.load leaves numpy
  /// arrays on the CPU whatever map_location says.
  bool follows_map_location = true;
  std::uint64_t nbytes = 0;
  /// Where the bytes are in the file: the zip record, an entry of the checkpoint's archive. Valid
  /// only while the Checkpoint lives, so only open() and placement read it, never a method of a
  /// Storage or Tensor, which may outlive the Checkpoint (FileView::record names it for those).
  const zip::Entry* record = nullptr;
  /// Its position in CheckpointState::storages, set as it joins them (Access::add_storage).
  std::size_t index = SIZE_MAX;
  /// The open's Limits::max_overlapping_view_bytes, for the reads of its tensors, which may
  /// outlive the checkpoint and its options (set by Access::add_storage).
  std::uint64_t max_overlapping_view_bytes = Limits{}.max_overlapping_view_bytes;
};

/// The unit a big-endian file's elements of `dtype` are swapped in: the element, or each half of
/// a complex number (torch/_utils.py _byteswap goes through the real dtype).
[[nodiscard]] inline std::uint8_t swap_unit_for(Dtype dtype) noexcept {
  const auto size = static_cast<std::uint8_t>(element_size(dtype));
  const bool is_complex =
      dtype == Dtype::kComplex32 || dtype == Dtype::kComplex64 || dtype == Dtype::kComplex128;
  return is_complex ? static_cast<std::uint8_t>(size / 2) : size;
}

/// Where a storage's bytes start in the file (its record's data, or its legacy range): the order
/// placement reads storages in.
[[nodiscard]] inline std::uint64_t file_offset(const StorageState& storage) noexcept {
  if (storage.record != nullptr) return storage.record->data_offset;
  return storage.file_range && !storage.file_range->file ? storage.file_range->offset : 0;
}

/// A checkpoint's tensors: the list of 100 000 tensors (15 MB) gets a mapping of its own.
using TensorList = std::vector<NamedTensor, common::LargeArrayAllocator<NamedTensor>>;

struct CheckpointState {
  Format format = Format::kZip;
  std::string path;
  std::shared_ptr<const common::MappedFile> file;
  std::optional<zip::Archive> archive;
  /// The top folder of the zip records ("model" for model/data.pkl).
  std::string top_folder;
  bool big_endian = false;
  /// data.pkl's bytes (a view of the file, or inflated): the value tree borrows them.
  std::optional<zip::RecordBytes> pickle_bytes;
  pickle::Result pickle;
  std::vector<std::shared_ptr<Storage>> storages;
  TensorList tensors;
  std::vector<OpaqueValue> opaque_values;
  /// The format's own string metadata (a safetensors header's __metadata__), sorted by key.
  std::vector<std::pair<std::string, std::string>> metadata;
  /// A sharded checkpoint's shards, whose tensors and storages moved here (torch/shards.hpp).
  std::vector<Checkpoint> shards;
  std::vector<UnusedStorage> unused_storages;
  /// Storages a listed tensor is made from without viewing them: a nested tensor's buffer (it
  /// may have no component) and its sizes, strides and offsets tensors.
  std::vector<const Storage*> metadata_storages;
  /// What open() was asked, for Checkpoint::to() to place an opened checkpoint's storages as
  /// load() would have (CRC checks, floating_dtype, copies, io): its map_location and tensor
  /// choice, which to() has no use for, are cleared.
  LoadOptions open_options;
  /// Set where a pass over every tensor found no wrapper subclass (record_unused_storages):
  /// placement then need not read 100 000 tensors again to look for one. Removing tensors
  /// keeps it true; whatever lists a tensor afterwards must clear it.
  bool no_wrapper_subclasses = false;
  /// Bytes of storage placement has taken from the file (a view counts its storage's bytes: it
  /// is what the caller may read); partial loads are tested by it (docs/partial-loading.md).
  std::uint64_t placed_bytes = 0;
  /// Checkpoint::find's index: positions in `tensors`, sorted by name (stable: the first of
  /// equal names first), built by the first lookup, so a load that never looks one up pays
  /// nothing for it. The flag makes concurrent first lookups build it once.
  std::once_flag name_index_built;
  std::vector<std::size_t> name_index;
};

}  // namespace pthload::internal
