// Parsing a sharded checkpoint's index (transformers' *.index.json; docs/accepted-input.md).
#include "safetensors/index.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "pthload/error.hpp"
#include "safetensors/json_tree.hpp"

namespace pthload::safetensors {
namespace {

using nlohmann::json;

[[noreturn]] void fail(std::string message, std::optional<std::uint64_t> offset = {}) {
  throw FormatError(Errc::kShardIndexBad, "shard index: " + std::move(message), {.offset = offset});
}

bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\\\0", 3)) == std::string_view::npos;
}

}  // namespace

ShardIndex parse_index(std::span<const std::byte> bytes) {
  if (bytes.size() > kMaxIndexBytes) {
    fail(fmt::format("{} bytes, above the limit of {}", bytes.size(), kMaxIndexBytes));
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  // An index nests two levels (weight_map, metadata); JsonTree's teardown recurses per level.
  constexpr int kMaxIndexNesting = 16;
  if (!nesting_within(text, kMaxIndexNesting)) {
    fail(fmt::format("JSON nested deeper than {} levels", kMaxIndexNesting));
  }
  std::optional<JsonTree> tree;
  try {
    tree.emplace(text);
  } catch (const json::parse_error& e) {
    fail(fmt::format("not valid JSON: {}", e.what()), e.byte > 0 ? e.byte - 1 : 0);
  } catch (const json::exception& e) {
    fail(fmt::format("not valid JSON: {}", e.what()));
  }
  const json& root = tree->root();
  if (!root.is_object())
    fail(fmt::format("the root is a JSON {}, not an object", root.type_name()));
  const auto weight_map = root.find("weight_map");
  if (weight_map == root.end() || !weight_map->is_object()) {
    fail("no \"weight_map\" object (tensor name → shard file)");
  }

  ShardIndex index;
  for (const auto& [name, shard] : weight_map->items()) {
    if (!shard.is_string()) {
      fail(fmt::format("weight_map['{}'] is a JSON {}, not a file name", name, shard.type_name()));
    }
    auto file = shard.get<std::string>();
    if (!is_plain_file_name(file)) {
      throw FormatError(Errc::kShardNameUnsafe,
                        fmt::format("shard index: weight_map['{}'] names '{}', which is not a "
                                    "plain file name beside the index",
                                    name, file.substr(0, 200)));
    }
    index.shards.push_back(file);
    index.weight_map.emplace_back(name, std::move(file));
  }
  std::sort(index.shards.begin(), index.shards.end());
  index.shards.erase(std::unique(index.shards.begin(), index.shards.end()), index.shards.end());

  if (const auto metadata = root.find("metadata"); metadata != root.end()) {
    if (metadata->is_object()) {
      for (const auto& [key, value] : metadata->items()) {
        if (value.is_string()) {
          index.metadata.emplace_back(key, value.get<std::string>());
        } else if (value.is_number()) {
          index.metadata.emplace_back(key, value.dump());
        }
      }
    } else if (!metadata->is_null()) {
      fail(fmt::format("\"metadata\" is a JSON {}, not an object", metadata->type_name()));
    }
  }
  return index;
}

}  // namespace pthload::safetensors
