// torch.distributed.checkpoint directories (`.metadata` + `__<rank>_<n>.distcp` files, written
// by dcp.save / FileSystemWriter) opened as one Checkpoint (DESIGN.md "Sets of files";
// docs/format.md §12; docs/dcp.md).
#pragma once

#include <filesystem>
#include <optional>

#include "pthload/checkpoint.hpp"

namespace pthload::formats {

/// Whether `path` is a directory holding a `.metadata` file (DCP's, filesystem.py
/// _metadata_fn). Throws only std::bad_alloc (building the file's path).
[[nodiscard]] bool is_dcp_directory(const std::filesystem::path& path);

/// The directory of `path` when `path` is a DCP `.metadata` file (named so, in a directory
/// is_dcp_directory accepts), else nullopt. Throws only std::bad_alloc.
[[nodiscard]] std::optional<std::filesystem::path> dcp_directory_of_metadata(
    const std::filesystem::path& path);

/// Opens the DCP directory `directory` as one Checkpoint (Format::kDcp): every tensor of its
/// `.metadata` under the name dcp.load uses (the flattened fqn, "model.layers.0.weight"), after
/// options' filter (select, rename_prefix, only, exclude, predicate), in the metadata's order. A
/// tensor saved in one chunk is the tensor of that item's torch.save stream, its storage a range of
/// the .distcp file (placed by load() as any storage: zero-copy views when mapped); a tensor saved
/// in several chunks (a DTensor or ShardedTensor) is assembled at open() from its chunks' items
/// into one owned, contiguous buffer. A .distcp file is opened only when a chosen tensor has an
/// item there. Bytes items (non-tensor values) are listed in opaque_values() and not read.
/// With options.io = kRead nothing is mapped: .metadata and each chosen item are read with
/// pread. Throws FormatError (kDcp* codes; kShardNameUnsafe; the pickle and zip layers' codes
/// for a malformed .metadata or item, with the path of the file and the item's offset as
/// record), UnsupportedError (kDcpTransformUnsupported, an unknown dtype), IoError.
[[nodiscard]] Checkpoint open_dcp(const std::filesystem::path& directory,
                                  const LoadOptions& options);

}  // namespace pthload::formats
