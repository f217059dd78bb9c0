// The `.metadata` file of a torch.distributed.checkpoint directory: a pickle of the Metadata
// dataclass (torch/distributed/checkpoint/metadata.py, filesystem.py _StorageInfo), read
// through the pickle layer and interpreted here without calling anything (docs/format.md §12).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pthload/limits.hpp"

namespace pthload::dcp {

/// Where one item's bytes are: a range of a file of the directory (filesystem.py _StorageInfo).
struct ItemLocation {
  std::string relative_path;  ///< a plain file name ("__0_0.distcp"), checked: no '/', no ".."
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

/// One chunk of a tensor (ChunkStorageMetadata): the box [offsets, offsets + sizes) of the
/// whole tensor that one item holds.
struct Chunk {
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint64_t> sizes;
  ItemLocation location;
};

/// One entry of state_dict_metadata: a tensor (TensorStorageMetadata) or a bytes item
/// (BytesStorageMetadata: any other value, torch.save'd by the planner).
struct Entry {
  std::string fqn;  ///< the flattened name dcp.load uses ("model.layers.0.weight")
  bool is_tensor = false;
  /// Tensors: torch's dtype attribute name ("float32", "bfloat16"), the global's name as
  /// written; the torch layer maps it.
  std::string dtype_name;
  std::vector<std::uint64_t> size;
  /// Tensors: every chunk, each with its item; they tile `size` exactly (checked).
  std::vector<Chunk> chunks;
  /// Bytes items: where the item is.
  std::optional<ItemLocation> bytes_location;
};

struct Metadata {
  std::vector<Entry> entries;  ///< in state_dict_metadata's order
  std::string version;         ///< Metadata.version ("1.0.0"); empty when the file has none
};

/// Interprets the pickle in `bytes` as DCP's Metadata. Every class must be the one DCP writes
/// (by module and name); every size, offset and length an integer in range; every chunk inside
/// its tensor, the chunks of a tensor disjoint and covering it; every chunk and bytes item with
/// exactly one storage_data entry. Throws FormatError (the pickle layer's codes with the
/// offset; kDcpBadMetadata, kDcpBadChunks naming the entry; kShardNameUnsafe for a
/// relative_path that leaves the directory) and UnsupportedError (kDcpTransformUnsupported: an
/// item written through stream transform extensions, such as compression).
[[nodiscard]] Metadata parse_metadata(std::span<const std::byte> bytes, const Limits& limits);

}  // namespace pthload::dcp
