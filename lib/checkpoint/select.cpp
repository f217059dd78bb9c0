// Choosing tensors and renaming them after open() has named them, before anything is placed:
// what a tensor-parallel rank or a runtime expecting other names needs (issue 14).
#include "checkpoint/select.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "pthload/error.hpp"

namespace pthload::internal {
namespace {

// One `[...]` set at the start of `glob` (after the `[`): whether `c` is in it, and where the set
// ends. A set without its `]` is no set: the `[` matches itself, as fnmatch has it.
std::optional<std::pair<bool, std::size_t>> match_set(std::string_view glob, char c) {
  std::size_t i = 0;
  const bool negated = i < glob.size() && glob[i] == '!';
  if (negated) ++i;
  bool found = false;
  bool first = true;
  for (; i < glob.size() && (first || glob[i] != ']'); ++i, first = false) {
    if (i + 2 < glob.size() && glob[i + 1] == '-' && glob[i + 2] != ']') {
      found = found || (glob[i] <= c && c <= glob[i + 2]);
      i += 2;
    } else {
      found = found || glob[i] == c;
    }
  }
  if (i >= glob.size()) return std::nullopt;
  return std::pair{found != negated, i + 1};
}

// The tensors' storages, parts included (sparse parts, nested components, quantization scales
// and zero points): what a kept tensor needs placed.
void collect_storages(const Tensor& tensor, std::unordered_set<const Storage*>& out) {
  if (tensor.has_storage()) out.insert(&tensor.storage());
  for (const Tensor& part : tensor.parts())
    collect_storages(part, out);
  if (const Quantization* q = tensor.quantization()) {
    if (q->scales) collect_storages(*q->scales, out);
    if (q->zero_points) collect_storages(*q->zero_points, out);
  }
}

bool uses_any(const Tensor& tensor, const std::unordered_set<const Storage*>& storages) {
  std::unordered_set<const Storage*> used;
  collect_storages(tensor, used);
  return std::any_of(used.begin(), used.end(),
                     [&](const Storage* s) { return storages.contains(s); });
}

// Keeps the storages `keep` holds, and the metadata storages among them.
void keep_storages(internal::CheckpointState& checkpoint,
                   const std::unordered_set<const Storage*>& keep) {
  std::erase_if(checkpoint.storages,
                [&](const std::shared_ptr<Storage>& s) { return !keep.contains(s.get()); });
  std::erase_if(checkpoint.metadata_storages, [&](const Storage* s) { return !keep.contains(s); });
}

}  // namespace

bool glob_matches(std::string_view glob, std::string_view name) noexcept {
  // Iterative, with one backtrack point (the last `*`): linear-ish, never exponential.
  std::size_t g = 0;
  std::size_t n = 0;
  std::size_t star = std::string_view::npos;
  std::size_t star_name = 0;
  while (n < name.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star = g++;
      star_name = n;
      continue;
    }
    if (g < glob.size()) {
      if (glob[g] == '?') {
        ++g;
        ++n;
        continue;
      }
      if (glob[g] == '[') {
        if (const auto set = match_set(glob.substr(g + 1), name[n])) {
          if (set->first) {
            g += 1 + set->second;
            ++n;
            continue;
          }
        } else if (name[n] == '[') {
          ++g;
          ++n;
          continue;
        }
      } else if (glob[g] == name[n]) {
        ++g;
        ++n;
        continue;
      }
    }
    if (star == std::string_view::npos) return false;
    g = star + 1;
    n = ++star_name;
  }
  while (g < glob.size() && glob[g] == '*')
    ++g;
  return g == glob.size();
}

bool chooses_tensors(const LoadOptions& options) noexcept {
  return !options.filter.select.empty() || !options.filter.rename_prefix.empty() ||
         !options.filter.only.empty() || !options.filter.exclude.empty() ||
         static_cast<bool>(options.filter.predicate);
}

std::optional<std::string> renamed(const LoadOptions& options, std::string_view name) {
  if (!options.filter.select.empty()) {
    if (name.size() <= options.filter.select.size() || !name.starts_with(options.filter.select) ||
        name[options.filter.select.size()] != '.') {
      return std::nullopt;
    }
    name.remove_prefix(options.filter.select.size() + 1);
  }
  for (const auto& [from, to] : options.filter.rename_prefix) {
    if (name.starts_with(from)) return to + std::string(name.substr(from.size()));
  }
  return std::string(name);
}

bool chosen(const LoadOptions& options, std::string_view name) {
  const auto matches = [&](const std::string& glob) { return glob_matches(glob, name); };
  if (!options.filter.only.empty() &&
      std::none_of(options.filter.only.begin(), options.filter.only.end(), matches)) {
    return false;
  }
  if (std::any_of(options.filter.exclude.begin(), options.filter.exclude.end(), matches))
    return false;
  return !options.filter.predicate || options.filter.predicate(name);
}

void choose_tensors(internal::CheckpointState& checkpoint, const LoadOptions& options,
                    bool check_select) {
  if (!chooses_tensors(options)) return;
  internal::TensorList kept;
  std::unordered_map<std::string_view, std::string_view> renamed_from;
  bool selected_any = false;
  // Saved names live in `checkpoint.tensors` until the end of this function.
  std::vector<std::string> saved_names;
  for (auto& named : checkpoint.tensors) {
    auto name = renamed(options, named.name);
    if (!name) continue;
    selected_any = true;
    if (!chosen(options, *name)) continue;
    saved_names.push_back(named.name);
    named.name = std::move(*name);
    kept.push_back(std::move(named));
  }
  if (check_select && !options.filter.select.empty() && !selected_any) {
    throw FormatError(Errc::kSelectNotFound,
                      fmt::format("select '{}' names no sub-tree holding tensors: no tensor is "
                                  "named '{}.<name>'",
                                  options.filter.select, options.filter.select),
                      {.path = checkpoint.path});
  }
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const auto [other, inserted] = renamed_from.emplace(kept[i].name, saved_names[i]);
    if (!inserted) {
      // A pickle may name two tensors alike (a repeated dict key): no renaming parts them.
      throw FormatError(Errc::kSelectNameCollision,
                        other->second == saved_names[i]
                            ? fmt::format("two tensors are named '{}' in the file", saved_names[i])
                            : fmt::format("tensors '{}' and '{}' would both be named '{}'",
                                          other->second, saved_names[i], kept[i].name),
                        {.path = checkpoint.path});
    }
  }
  std::unordered_set<const Storage*> used;
  for (const auto& named : kept)
    collect_storages(named.tensor, used);
  // A nested tensor's sizes, strides and offsets storages are not its parts: keep them all
  // while any nested tensor is kept (they are small; the storages of left-out ones would only
  // cost their bytes).
  const bool keeps_nested = std::any_of(kept.begin(), kept.end(), [](const NamedTensor& t) {
    return t.tensor.layout() == Layout::kNested;
  });
  if (keeps_nested)
    used.insert(checkpoint.metadata_storages.begin(), checkpoint.metadata_storages.end());
  checkpoint.tensors = std::move(kept);
  keep_storages(checkpoint, used);
}

void drop_storages(internal::CheckpointState& checkpoint,
                   const std::unordered_set<const Storage*>& storages) {
  if (storages.empty()) return;
  std::erase_if(checkpoint.tensors,
                [&](const NamedTensor& named) { return uses_any(named.tensor, storages); });
  std::erase_if(checkpoint.storages,
                [&](const std::shared_ptr<Storage>& s) { return storages.contains(s.get()); });
  std::erase_if(checkpoint.metadata_storages,
                [&](const Storage* s) { return storages.contains(s); });
}

}  // namespace pthload::internal
