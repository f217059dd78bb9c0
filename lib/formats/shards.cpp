// Composing a sharded checkpoint's shards into one Checkpoint (transformers' index format:
// modeling_utils.load_sharded_checkpoint reads each shard whole; docs/accepted-input.md).
#include "formats/shards.hpp"
#include "formats/parts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <system_error>

#include "checkpoint/access.hpp"
#include "checkpoint/select.hpp"
#include "checkpoint/state.hpp"
#include "common/check.hpp"
#include "common/mapped_file.hpp"
#include "formats/open.hpp"
#include "formats/read_image.hpp"
#include "pthload/error.hpp"
#include "safetensors/index.hpp"

namespace pthload::formats {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kIndexSuffix = ".index.json";

bool is_index_name(const fs::path& path) {
  return path.filename().string().ends_with(kIndexSuffix);
}

}  // namespace

std::optional<fs::path> shard_index_of(const fs::path& path) {
  std::error_code ignored;  // a path that is not there is no directory: open() will say so
  if (!fs::is_directory(path, ignored)) {
    if (is_index_name(path)) return path;
    return std::nullopt;
  }
  for (const char* name : {"model.safetensors.index.json", "pytorch_model.bin.index.json"}) {
    if (fs::is_regular_file(path / name, ignored)) return path / name;
  }
  std::vector<fs::path> indexes;
  std::vector<std::string> files;
  // Without exceptions: a filesystem_error is no pthload::Error.
  std::error_code error;
  for (fs::directory_iterator it(path, error); !error && it != fs::directory_iterator();
       it.increment(error)) {
    if (!it->is_regular_file(ignored)) continue;
    if (is_index_name(it->path())) indexes.push_back(it->path());
    files.push_back(it->path().filename().string());
  }
  if (error) {
    throw IoError(Errc::kIoOpenFailed,
                  fmt::format("cannot list the directory: {}", error.message()),
                  {.path = path.string()});
  }
  if (indexes.size() == 1) return indexes.front();
  std::sort(files.begin(), files.end());
  throw FormatError(
      Errc::kShardNoIndex,
      indexes.empty()
          ? fmt::format(
                "the directory holds no model.safetensors.index.json or "
                "pytorch_model.bin.index.json{}",
                files.size() == 1 ? fmt::format(" (only '{}': open that file)", files[0]) : "")
          : fmt::format("the directory holds {} *.index.json files and no "
                        "model.safetensors.index.json or pytorch_model.bin.index.json: open one",
                        indexes.size()),
      {.path = path.string()});
}

Checkpoint open_sharded(const fs::path& index_path, const LoadOptions& options) {
  auto state = std::make_unique<internal::CheckpointState>();
  state->path = index_path.string();
  common::with_context({.path = state->path}, [&] {
    state->file = open_file(index_path, options).file;
    const auto index = safetensors::parse_index(state->file->bytes());
    state->metadata = index.metadata;

    // Which shard each tensor belongs to, by name: the index's word, checked against the shards.
    std::map<std::string_view, std::string_view> shard_of;
    for (const auto& [name, shard] : index.weight_map)
      shard_of.emplace(name, shard);
    std::map<std::string_view, std::size_t> found_in_shard;

    // A shard is opened only when options keep one of the tensors the index puts in it (lazy
    // shards: a rank that wants a few tensors maps and parses only their shards).
    std::set<std::string_view> wanted_shards;
    bool selected_any = false;
    for (const auto& [name, shard] : index.weight_map) {
      const auto kept_name = internal::renamed(options, name);
      selected_any = selected_any || kept_name.has_value();
      if (kept_name && internal::chosen(options, *kept_name)) wanted_shards.insert(shard);
    }
    if (!options.filter.select.empty() && !selected_any) {
      throw FormatError(Errc::kSelectNotFound,
                        fmt::format("select '{}' names no tensor of the index: none is named "
                                    "'{}.<name>'",
                                    options.filter.select, options.filter.select));
    }

    std::optional<Format> format;
    for (const auto& shard : index.shards) {
      if (!wanted_shards.contains(shard)) continue;
      const fs::path shard_path = index_path.parent_path() / shard;
      // The index names the file: a FIFO there would block the open, /dev/zero be read without
      // end. (A missing one is left to open_file, which says so.)
      std::error_code ignored;
      const auto type = fs::status(shard_path, ignored).type();
      if (type != fs::file_type::not_found && type != fs::file_type::regular) {
        throw IoError(Errc::kIoOpenFailed, "a shard the index names is not a regular file",
                      {.path = shard_path.string()});
      }
      common::with_context({.path = shard_path.string()}, [&] {
        auto opened = open_file(shard_path, options);
        const auto file = opened.file;  // kept: the shard's storages are pointed at it below
        Checkpoint part =
            open_mapped(file, shard_path.string(), options, std::move(opened.central_directory));
        auto& part_state = internal::Access::state(part);
        if (format && *format != part_state.format) {
          throw FormatError(Errc::kShardMixedFormats,
                            fmt::format("this shard is a {} file, the shards before it {}",
                                        format_name(part_state.format), format_name(*format)));
        }
        format = part_state.format;
        for (const auto& named : part_state.tensors) {
          const auto listed = shard_of.find(named.name);
          if (listed == shard_of.end() || listed->second != shard) {
            throw FormatError(
                Errc::kShardTensorUnlisted,
                listed == shard_of.end()
                    ? fmt::format("tensor '{}' is in this shard but not in the index", named.name)
                    : fmt::format("tensor '{}' is in this shard, but the index puts it in '{}'",
                                  named.name, listed->second));
          }
          ++found_in_shard[listed->first];
        }
        for (const auto& storage : part_state.storages) {
          point_at_file(internal::Access::state(*storage), file, 0);
        }
        std::move(part_state.tensors.begin(), part_state.tensors.end(),
                  std::back_inserter(state->tensors));
        std::move(part_state.storages.begin(), part_state.storages.end(),
                  std::back_inserter(state->storages));
        std::move(part_state.opaque_values.begin(), part_state.opaque_values.end(),
                  std::back_inserter(state->opaque_values));
        std::move(part_state.unused_storages.begin(), part_state.unused_storages.end(),
                  std::back_inserter(state->unused_storages));
        state->metadata_storages.insert(state->metadata_storages.end(),
                                        part_state.metadata_storages.begin(),
                                        part_state.metadata_storages.end());
        // The shard's pickle and archive stay alive with the checkpoint: nothing moved out of
        // them points in, but a shard is cheap to keep.
        state->shards.push_back(std::move(part));
      });
    }
    for (const auto& [name, shard] : index.weight_map) {
      if (wanted_shards.contains(shard) && !found_in_shard.contains(name)) {
        throw FormatError(Errc::kShardTensorMissing,
                          fmt::format("the index puts tensor '{}' in '{}', which has no tensor of "
                                      "that name",
                                      name, shard),
                          {.path = (index_path.parent_path() / shard).string()});
      }
    }
    // With every shard left out, the index's name is all there is to say the format by.
    const bool torch_index =
        index_path.filename().string().ends_with(".bin" + std::string(kIndexSuffix));
    state->format = format.value_or(torch_index ? Format::kZip : Format::kSafetensors);
    internal::choose_tensors(*state, options, /*check_select=*/false);
  });
  return internal::Access::make_checkpoint(std::move(state));
}

}  // namespace pthload::formats
