// What a save writes, decided before the first byte: the storages (keys in first-use order,
// sizes, where their bytes come from) and the tensors over them, checked against each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pthload/save.hpp"
#include "pthload/tensor.hpp"

namespace pthload::writer {

/// A tensor's elements as a strided walk over its source (compact_views).
struct Gather {
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  std::int64_t offset = 0;  // elements
  std::size_t element_size = 1;
  const Tensor* tensor = nullptr;  // the source tensor, for a checkpoint's (may use copy_to)
};

struct PlannedStorage {
  std::string key;  // "0", "1", ... in the order the pickle first names them, as torch.save
  Dtype dtype = Dtype::kUInt8;
  std::uint64_t nbytes = 0;
  std::string location;
  // The bytes: a checkpoint's storage, or the caller's memory.
  const Storage* storage = nullptr;
  std::span<const std::byte> memory;
  /// compact_views: the tensor's elements gathered from the source, not its bytes whole (a
  /// pointer: most storages have none, and a plan holds one per storage).
  std::unique_ptr<Gather> gather;
  /// The CRC-32 the source archive gives these very bytes: the storage is a whole stored record
  /// of a checkpoint that lives for the save (save.cpp, adopt_record_crcs). Its bytes are then
  /// copied and not read, and the CRC travels with them, as a copied file keeps its own.
  std::optional<std::uint32_t> source_crc;
};

struct PlannedTensor {
  std::string_view name;  // borrowed from the caller's tensors
  std::size_t storage = 0;
  Dtype dtype = Dtype::kFloat32;
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  std::int64_t storage_offset = 0;
  bool requires_grad = false;
  /// An earlier tensor this one is the same as (storage, dtype, geometry, requires_grad): the
  /// pickle refers back to it, as torch.save does for one tensor under two names (tied weights).
  std::size_t same_as = SIZE_MAX;
};

struct Plan {
  std::vector<PlannedStorage> storages;
  std::vector<PlannedTensor> tensors;
  std::vector<std::string> skipped;
};

/// The plan for a checkpoint's tensors, or the caller's. Throws the errors save() documents.
[[nodiscard]] Plan plan_save(std::span<const NamedTensor> tensors, const SaveOptions& options);
[[nodiscard]] Plan plan_save(std::span<const MemoryTensor> tensors, const SaveOptions& options);

/// data.pkl: a dict of the plan's tensors by name (nested by dots when asked), or the tensor
/// alone when the plan is one tensor named "". Renumbers and reorders the plan's storages to
/// the order the pickle first names them, which is the order their records must have. Throws
/// FormatError(kSaveNameCollision), FormatError(kSaveBadTensor) for a name that is not UTF-8.
[[nodiscard]] std::string data_pickle(Plan& plan, const SaveOptions& options);

/// torch's legacy storage class for `dtype` ("FloatStorage"), or "" for the dtypes torch writes
/// as an UntypedStorage with _rebuild_tensor_v3 (torch.storage._new_dtypes: uint16/32/64,
/// float8, complex32, bits...).
[[nodiscard]] std::string_view legacy_storage_class(Dtype dtype) noexcept;

/// Whether `tag` is a location tag torch writes: a device type (lower-case letters, digits and
/// '_', starting with a letter), optionally ':' and an index without sign or leading zero.
[[nodiscard]] bool is_location_tag(std::string_view tag) noexcept;

}  // namespace pthload::writer
