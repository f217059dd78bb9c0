// object_tree() and referenced_globals(): what an auditor sees of a checkpoint. Both read the
// value tree the torch layer kept; neither follows a persistent id into storage bytes.
#include "pthload/inspect.hpp"

#include <algorithm>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "pickle/print.hpp"
#include "torch/globals.hpp"
#include "torch/interpreted.hpp"
#include "torch/storage_types.hpp"

namespace pthload {

using pickle::Kind;
using pickle::Value;

namespace {

// Every value of the tree once, iteratively: trees can be deep and cyclic.
template <typename Visit>
void for_each_value(const Value& root, Visit&& visit) {
  std::unordered_set<const Value*> seen;
  std::vector<const Value*> pending{&root};
  const auto push = [&](const Value* value) {
    if (value != nullptr && seen.insert(value).second) pending.push_back(value);
  };
  seen.insert(&root);
  while (!pending.empty()) {
    const Value& value = *pending.back();
    pending.pop_back();
    visit(value);
    for (const Value* item : value.items())
      push(item);
    for (const auto& entry : value.dict_items()) {
      push(entry.key);
      push(entry.value);
    }
    for (const Value* item : value.added_items())
      push(item);
    for (const Value* state : value.states())
      push(state);
    if (value.is(Kind::kCall)) {
      push(&value.callable());
      push(&value.args());
      push(value.kwargs());
    } else if (value.is(Kind::kPersistent)) {
      push(&value.persistent_id());
    }
  }
}

}  // namespace

namespace {

pickle::PrintOptions print_options_of(const TreeOptions& options) {
  pickle::PrintOptions print_options;
  print_options.max_depth = options.max_depth;
  print_options.max_items = options.max_items;
  print_options.max_string = options.max_string;
  return print_options;
}

}  // namespace

std::string object_tree(const Checkpoint& checkpoint, const TreeOptions& options) {
  const auto& state = internal::Access::state(checkpoint);
  if (state.pickle.root == nullptr) return {};  // a safetensors file has no pickle
  return pickle::print(*state.pickle.root, print_options_of(options));
}

void object_tree(std::ostream& out, const Checkpoint& checkpoint, const TreeOptions& options) {
  const auto& state = internal::Access::state(checkpoint);
  if (state.pickle.root == nullptr) return;
  pickle::print(out, *state.pickle.root, print_options_of(options));
}

std::vector<GlobalReference> referenced_globals(const Checkpoint& checkpoint) {
  const auto& state = internal::Access::state(checkpoint);
  std::vector<GlobalReference> globals;
  if (state.pickle.root == nullptr) return globals;  // a safetensors file has no pickle
  for_each_value(*state.pickle.root, [&](const Value& value) {
    if (!value.is(Kind::kGlobal)) return;
    globals.push_back(
        {std::string(value.module()), std::string(value.name()), torch::is_interpreted(value)});
  });
  const auto by_name = [](const GlobalReference& a, const GlobalReference& b) {
    return std::tie(a.module, a.name) < std::tie(b.module, b.name);
  };
  std::sort(globals.begin(), globals.end(), by_name);
  // The same global can be several nodes (GLOBAL written twice, or unmemoised).
  globals.erase(std::unique(globals.begin(), globals.end(),
                            [](const GlobalReference& a, const GlobalReference& b) {
                              return a.module == b.module && a.name == b.name;
                            }),
                globals.end());
  return globals;
}

}  // namespace pthload
