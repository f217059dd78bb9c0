// Test helper: torch.distributed.checkpoint .metadata pickles written by hand, as DCP's
// FileSystemWriter pickles its Metadata (torch/distributed/checkpoint/metadata.py), so tests can
// build well-formed and malformed ones: for lib/dcp's parser and for DCP directories.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/pickle_writer.hpp"

namespace pthload::test::dcp_build {

namespace names {
constexpr std::string_view kMeta = "torch.distributed.checkpoint.metadata";
constexpr std::string_view kFs = "torch.distributed.checkpoint.filesystem";
}  // namespace names

/// One chunk of the tensor, and where its item lies.
struct ChunkSpec {
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> sizes;
  std::string path = "__0_0.distcp";
  std::int64_t offset = 0;
  std::int64_t length = 100;
  bool listed = true;      // has a storage_data entry
  bool transform = false;  // written through a stream transform
};

/// torch.Size(`values`).
inline void size(PickleWriter& p, const std::vector<std::int64_t>& values) {
  p.global("torch", "Size").mark().mark();
  for (const auto v : values)
    p.integer(v);
  p.tuple().tuple().reduce();
}

/// `module`.`name`() as NEWOBJ.
inline void object(PickleWriter& p, std::string_view module, std::string_view name) {
  p.global(module, name).empty_tuple().op('\x81');  // NEWOBJ
}

/// A .metadata pickle with one float32 tensor "w" of `sizes` in the given chunks, as DCP writes it.
inline std::string metadata_pickle(const std::vector<std::int64_t>& sizes,
                                   const std::vector<ChunkSpec>& chunks,
                                   std::string_view root = "Metadata") {
  PickleWriter p;
  object(p, names::kMeta, root);
  p.empty_dict().mark().str("state_dict_metadata").empty_dict().mark().str("w");
  object(p, names::kMeta, "TensorStorageMetadata");
  p.empty_dict().mark().str("properties");
  object(p, names::kMeta, "TensorProperties");
  p.mark().global("torch", "float32").none().boolean(false).none().boolean(false).tuple().build();
  p.str("size");
  size(p, sizes);
  p.str("chunks").empty_list().mark();
  for (const auto& chunk : chunks) {
    object(p, names::kMeta, "ChunkStorageMetadata");
    p.empty_dict().mark().str("offsets");
    size(p, chunk.offsets);
    p.str("sizes");
    size(p, chunk.sizes);
    p.setitems().build();
  }
  p.appends().setitems().build().setitems();
  p.str("storage_data").empty_dict().mark();
  for (const auto& chunk : chunks) {
    if (!chunk.listed) continue;
    object(p, names::kMeta, "MetadataIndex");
    p.empty_dict().mark().str("fqn").str("w").str("offset");
    size(p, chunk.offsets);
    p.setitems().build();
    object(p, names::kFs, "_StorageInfo");
    p.empty_dict().mark().str("relative_path").str(chunk.path).str("offset").integer(chunk.offset);
    p.str("length").integer(chunk.length);
    if (chunk.transform) p.str("transform_descriptors").empty_list().mark().str("zstd").appends();
    p.setitems().build();
  }
  p.setitems().str("version").str("1.0.0").setitems().build().stop();
  return p.bytes();
}

}  // namespace pthload::test::dcp_build
