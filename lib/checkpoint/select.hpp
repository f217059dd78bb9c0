// Choosing which tensors of a checkpoint to load and under which names: LoadOptions' filter:
// select, rename_prefix, only, exclude and predicate (docs/partial-loading.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "checkpoint/state.hpp"
#include "pthload/options.hpp"

namespace pthload::internal {

/// Whether `name` matches `glob`: `*` any run of characters (dots too), `?` one character,
/// `[abc]`, `[a-z]`, `[!a-z]` one character of (or not of) a set; everything else itself.
[[nodiscard]] bool glob_matches(std::string_view glob, std::string_view name) noexcept;

/// Whether `options` leave any tensor out or rename any (select, rename_prefix, only,
/// exclude, predicate): when not, open() keeps the checkpoint as it is.
[[nodiscard]] bool chooses_tensors(const LoadOptions& options) noexcept;

/// The name a tensor saved as `name` is kept under (select stripped, then renamed), or nullopt
/// when select leaves it out. Only/exclude/predicate are not asked (chosen() does).
[[nodiscard]] std::optional<std::string> renamed(const LoadOptions& options, std::string_view name);

/// Whether only/exclude/predicate keep a tensor whose (renamed) name is `name`.
[[nodiscard]] bool chosen(const LoadOptions& options, std::string_view name);

/// Applies select, rename_prefix, only, exclude and predicate to `checkpoint`'s tensors, then
/// drops the storages no remaining tensor uses (from storages(), so they are never placed).
/// unused_storages() keeps describing the file. Throws FormatError(kSelectNotFound) when
/// `select` names nothing (unless `check_select` is false: a sharded checkpoint checks its
/// index instead, as its left-out shards are never opened), FormatError(kSelectNameCollision)
/// when two kept tensors get one name.
void choose_tensors(internal::CheckpointState& checkpoint, const LoadOptions& options,
                    bool check_select = true);

/// Drops the tensors that use one of `storages` (directly, or through a part: sparse values,
/// nested components, quantization parameters), and those storages: a map_location's
/// kSkipStorage answer.
void drop_storages(internal::CheckpointState& checkpoint,
                   const std::unordered_set<const Storage*>& storages);

}  // namespace pthload::internal
