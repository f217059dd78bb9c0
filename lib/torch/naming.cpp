// The naming walk: an explicit stack, so a deep tree cannot overflow the C++ stack.
#include "torch/naming.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_set>

#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "torch/globals.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

// Python's str() of a dict key, for the keys checkpoints use; other keys get their kind.
std::string key_text(const Value& key) {
  switch (key.kind()) {
    case Kind::kString:
    case Kind::kPython2String:
      return std::string(key.as_string());
    case Kind::kInt:
      return std::to_string(key.as_int());
    case Kind::kBool:
      return key.as_bool() ? "True" : "False";
    case Kind::kNone:
      return "None";
    case Kind::kFloat:
      return fmt::format("{}", key.as_float());
    default:
      return fmt::format("<{}>", pickle::kind_name(key.kind()));
  }
}

std::string join(const std::string& prefix, std::string_view part) {
  if (prefix.empty()) return std::string(part);
  std::string name;
  name.reserve(prefix.size() + 1 + part.size());
  name += prefix;
  name += '.';
  name += part;
  return name;
}

struct Frame {
  const Value* value;  // nullptr marks leaving `leaving`
  const Value* leaving;
  std::string name;
  std::size_t depth;
};

class Walker {
 public:
  Walker(TensorBuilder& builder, const Limits& limits, std::size_t step_budget,
         std::vector<NamedTensor>& out, std::vector<OpaqueValue>& opaque)
      : builder_(builder), limits_(limits), out_(out), opaque_(opaque), step_budget_(step_budget) {}

  void run(const Value& root) {
    stack_.push_back({&root, nullptr, std::string(), 0});
    while (!stack_.empty()) {
      Frame frame = std::move(stack_.back());
      stack_.pop_back();
      if (frame.value == nullptr) {
        on_path_.erase(frame.leaving);
        continue;
      }
      if (++steps_ > step_budget_) {
        throw FormatError(Errc::kTorchLimitExceeded,
                          fmt::format("naming tensors took more than {} steps (8 per pickle "
                                      "byte, at most Limits::max_pickle_values): too many "
                                      "shared paths",
                                      step_budget_));
      }
      visit(*frame.value, std::move(frame.name), frame.depth);
    }
  }

 private:
  void visit(const Value& value, std::string name, std::size_t depth) {
    if (auto tensor = builder_.tensor_of(value)) {
      // A sparse tensor is listed, then its parts (DESIGN.md's schema: `<name>.indices`...).
      const auto parts = tensor->sparse_parts();
      const auto part_names = sparse_part_names(tensor->layout());
      for (std::size_t i = 0; i < parts.size(); ++i) {
        // A nested tensor's components are named by their index: `<name>.0`, `<name>.1`...
        if (tensor->layout() == Layout::kNested) {
          parts_.push_back({join(name, std::to_string(i)), parts[i]});
        } else if (i < part_names.size()) {
          parts_.push_back({join(name, part_names[i]), parts[i]});
        }
      }
      out_.push_back({std::move(name), std::move(*tensor)});
      for (auto& part : parts_)
        out_.push_back(std::move(part));
      parts_.clear();
      return;
    }
    if (auto reason = builder_.take_opaque_reason()) {
      opaque_.push_back({std::move(name), std::move(*reason)});
      return;
    }
    if (on_path_.contains(&value)) return;  // a cycle
    if (depth >= limits_.max_pickle_nesting) {
      throw FormatError(Errc::kTorchLimitExceeded,
                        fmt::format("objects nest deeper than {} (Limits::max_pickle_nesting)",
                                    limits_.max_pickle_nesting));
    }
    children_.clear();
    switch (value.kind()) {
      case Kind::kDict:
        add_entries(value.dict_items(), name);
        break;
      case Kind::kList:
      case Kind::kTuple: {
        std::size_t index = 0;
        for (const Value* item : value.items()) {
          children_.push_back({item, nullptr, join(name, std::to_string(index++)), depth + 1});
        }
        break;
      }
      case Kind::kCall:
        add_object(value, name);
        break;
      default:
        return;  // scalars, strings, sets, globals, bare storages: no tensors to name
    }
    if (children_.empty()) return;
    on_path_.insert(&value);
    stack_.push_back({nullptr, &value, std::string(), depth});
    // Pushed in reverse so they are visited in container order.
    for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
      it->depth = depth + 1;
      stack_.push_back(std::move(*it));
    }
  }

  void add_entries(std::span<const pickle::DictItem> entries, const std::string& name) {
    for (const auto& [key, item] : entries) {
      children_.push_back({item, nullptr, join(name, key_text(*key)), 0});
    }
  }

  // A dict-like (OrderedDict) contributes its items; any other object its state — the
  // attributes BUILD set (a dict, or a (dict, slots) pair) — and the items a dict or list
  // subclass received.
  void add_object(const Value& object, const std::string& name) {
    const KnownGlobal kind = classify_global(object.callable());
    if (kind == KnownGlobal::kDictLike) {
      add_entries(object.dict_items(), name);
      return;
    }
    if (kind == KnownGlobal::kRebuildFromType) {
      add_jagged_parts(object, name);
      return;
    }
    if (kind == KnownGlobal::kJitListBuilder) {
      // The list (or tagged value) stands in the call's place, under the call's name.
      if (!object.args().items().empty()) {
        children_.push_back({object.args().items()[0], nullptr, name, 0});
      }
      return;
    }
    if (const Value* state = object.state()) {
      if (state->is(Kind::kDict)) {
        add_entries(state->dict_items(), name);
      } else if (state->is(Kind::kTuple)) {
        for (const Value* part : state->items()) {
          if (part->is(Kind::kDict)) add_entries(part->dict_items(), name);
        }
      }
    }
    add_entries(object.dict_items(), name);
    std::size_t index = 0;
    for (const Value* item : object.items()) {
      children_.push_back({item, nullptr, join(name, std::to_string(index++)), 0});
    }
  }

  // _rebuild_from_type_v2(_rebuild_njt, NestedTensor, ({'values': ..., 'offsets': ...,
  // 'lengths': ..., ...},), state): the NJT's tensors, as `<name>.values`, `<name>.offsets` and
  // `<name>.lengths` (torch/nested/_internal/nested_tensor.py NestedTensor.__reduce_ex__). Its
  // cached metadata (min/max sequence lengths) is not listed.
  void add_jagged_parts(const Value& object, const std::string& name) {
    const auto args = object.args().items();
    if (args.size() < 3 || classify_global(*args[0]) != KnownGlobal::kRebuildJagged ||
        !args[2]->is(Kind::kTuple) || args[2]->items().empty() ||
        !args[2]->items()[0]->is(Kind::kDict)) {
      return;
    }
    for (const auto& [key, item] : args[2]->items()[0]->dict_items()) {
      if (!key->is(Kind::kString)) continue;
      const std::string_view field = key->as_string();
      if (field == "values" || field == "offsets" || field == "lengths") {
        children_.push_back({item, nullptr, join(name, field), 0});
      }
    }
  }

  TensorBuilder& builder_;
  const Limits& limits_;
  std::vector<NamedTensor>& out_;
  std::vector<OpaqueValue>& opaque_;
  std::vector<Frame> stack_;
  std::vector<Frame> children_;
  std::vector<NamedTensor> parts_;
  std::unordered_set<const Value*> on_path_;
  std::size_t step_budget_;
  std::size_t steps_ = 0;
};

}  // namespace

std::size_t walk_step_budget(std::size_t pickle_bytes, const Limits& limits) noexcept {
  // A 1 KB pickle of shared lists names 2^40 paths; under max_pickle_values alone (200 M steps by
  // default) it listed tens of GB of names before failing.
  const auto per_byte = common::checked_mul(pickle_bytes, kWalkStepsPerPickleByte);
  const auto budget = std::max<std::uint64_t>(per_byte.value_or(UINT64_MAX), kMinWalkSteps);
  return static_cast<std::size_t>(std::min<std::uint64_t>(budget, limits.max_pickle_values));
}

void collect_named_tensors(const Value& root, std::size_t pickle_bytes, TensorBuilder& builder,
                           const Limits& limits, std::vector<NamedTensor>& out,
                           std::vector<OpaqueValue>& opaque) {
  Walker(builder, limits, walk_step_budget(pickle_bytes, limits), out, opaque).run(root);
}

}  // namespace pthload::torch
