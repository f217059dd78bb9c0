// The index transformers writes beside a sharded checkpoint (model.safetensors.index.json,
// pytorch_model.bin.index.json: {"metadata": {"total_size": N}, "weight_map": {tensor: shard}};
// transformers modeling_utils save_pretrained, huggingface_hub split_torch_state_dict_into_shards).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace pthload::safetensors {

/// The largest index file accepted: as large as a safetensors header may be.
inline constexpr std::uint64_t kMaxIndexBytes = 100'000'000;

/// A parsed sharded-checkpoint index. Owns its strings.
struct ShardIndex {
  /// Tensor name → shard file name, sorted by tensor name.
  std::vector<std::pair<std::string, std::string>> weight_map;
  /// The distinct shard file names, sorted (pytorch_model-00001-of-00003.bin first).
  std::vector<std::string> shards;
  /// "metadata"'s members whose values are strings or numbers (total_size), as text, by key.
  std::vector<std::pair<std::string, std::string>> metadata;
};

/// Parses an index file's bytes. The root must be an object whose "weight_map" is an object of
/// strings; each shard name must be a plain file name (no directory part, not "." or "..", no
/// NUL): an index from a stranger cannot make pthload open files outside its folder. Throws
/// FormatError(kShardIndexBad, with the offset of a JSON fault; kShardNameUnsafe).
[[nodiscard]] ShardIndex parse_index(std::span<const std::byte> bytes);

}  // namespace pthload::safetensors
