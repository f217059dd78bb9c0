// Sharded checkpoints: the index transformers writes (model.safetensors.index.json,
// pytorch_model.bin.index.json) and its shards, opened as one Checkpoint (DESIGN.md "Sets of
// files"; docs/format.md §11 "HF sharded checkpoints").
#pragma once

#include <filesystem>
#include <optional>

#include "pthload/checkpoint.hpp"

namespace pthload::formats {

/// The index file that `path` stands for: `path` itself when it is a file named *.index.json;
/// for a directory, its model.safetensors.index.json, else its pytorch_model.bin.index.json,
/// else its only *.index.json. nullopt when `path` is neither (an ordinary checkpoint file).
/// Throws FormatError(kShardNoIndex) for a directory holding no index (naming what it holds
/// when it is a single checkpoint such as model.safetensors), IoError when it cannot be listed.
[[nodiscard]] std::optional<std::filesystem::path> shard_index_of(
    const std::filesystem::path& path);

/// Opens the shards that the index at `index_path` lists (files beside it) as one Checkpoint,
/// only those that hold a tensor options' filter (select, rename_prefix, only, exclude, predicate)
/// keep (the others are never opened, and need not exist), and applies those options to their
/// tensors: every shard's tensors, in shard order (the shards sorted by name), then in each shard's
/// own order; each storage's bytes a range of its shard's mapped file, so load() places them as it
/// places any storage. Each shard is mapped and only its header (safetensors) or pickle
/// (torch.save) is read. Every weight_map entry must be a tensor of its shard, and every tensor
/// of a shard listed for it; all shards must have one format (Checkpoint::format() gives it).
/// Checkpoint::metadata() gives the index's "metadata" (total_size). Throws FormatError
/// (kShard* codes, with the shard's path; kSelectNotFound when no name of the weight_map is
/// under options.select; kSelectNameCollision), UnsupportedError (kShardRecordCompressed: a zip
/// shard with a deflated storage record), and whatever opening a shard throws.
[[nodiscard]] Checkpoint open_sharded(const std::filesystem::path& index_path,
                                      const LoadOptions& options);

}  // namespace pthload::formats
