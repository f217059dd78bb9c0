// The naming walk and its audit (docs/naming.md): an explicit stack each, so a deep tree cannot
// overflow the C++ stack.
#include "torch/naming.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "checkpoint/access.hpp"
#include "common/bump_arena.hpp"
#include "common/checked.hpp"
#include "pickle/print.hpp"
#include "pthload/error.hpp"
#include "torch/globals.hpp"

namespace pthload::torch {
namespace {

using pickle::DictItem;
using pickle::Kind;
using pickle::Value;

// The size of join(prefix, part): a child of the root is named by its part alone.
std::size_t joined_size(std::string_view prefix, std::string_view part) noexcept {
  return prefix.empty() ? part.size() : prefix.size() + 1 + part.size();
}

// Writes join(prefix, part) at `out` (joined_size bytes); returns the end.
char* write_joined(char* out, std::string_view prefix, std::string_view part) noexcept {
  if (!prefix.empty()) {
    out = std::copy(prefix.begin(), prefix.end(), out);
    *out++ = '.';
  }
  return std::copy(part.begin(), part.end(), out);
}

// Sized once and filled by two copies: three checked appends after a reserve cost more than the
// allocation they follow. The names of tensors are made in blocks instead (NameBlocks).
std::string join(const std::string& prefix, std::string_view part) {
  std::string name(joined_size(prefix, part), '.');
  write_joined(name.data(), prefix, part);
  return name;
}

// A budget that grows with the pickle: `per_byte` for each of its bytes, at least `at_least`.
std::uint64_t per_pickle_byte(std::size_t pickle_bytes, std::uint64_t per_byte,
                              std::uint64_t at_least) noexcept {
  return std::max(at_least, common::checked_mul(pickle_bytes, per_byte).value_or(UINT64_MAX));
}

// The sizes and strides a listed tensor holds (beyond two dimensions, on the heap).
std::size_t shape_bytes(const Tensor& tensor) noexcept {
  return 2 * sizeof(std::int64_t) * tensor.dim();
}

// Whether a tensor can be found below `value`: scalars, strings, globals and persistent ids
// (bare storages) hold none, and skipping them keeps the walk's steps for what can.
bool may_hold_tensors(const Value& value) noexcept {
  switch (value.kind()) {
    case Kind::kTuple:
      return !value.items().empty();
    case Kind::kList:
    case Kind::kDict:
    case Kind::kSet:
    case Kind::kFrozenSet:
    case Kind::kCall:
      return true;
    default:
      return false;
  }
}

// A (key, value) pair as Python's dict() takes one from an iterable: a 2-tuple or a 2-list.
std::optional<DictItem> as_pair(const Value& value) noexcept {
  if (!value.is(Kind::kTuple) && !value.is(Kind::kList)) return std::nullopt;
  const auto items = value.items();
  if (items.size() != 2) return std::nullopt;
  return DictItem{items[0], items[1]};
}

bool is_sequence(const Value& value) noexcept {
  return value.is(Kind::kTuple) || value.is(Kind::kList) || value.is(Kind::kSet) ||
         value.is(Kind::kFrozenSet);
}

std::string entry_value_label(const Value& key, std::size_t index) {
  if (auto text = pickle::key_text(key)) return std::move(*text);
  return fmt::format("<value {}>", index);
}

// What an entry's value is named after: a str key itself and an int key's digits (state dicts,
// optimizer states), as key_text would write them, without building their text apart first;
// any other key's label. The view is into the key, `digits` or `label`.
std::string_view entry_part(const Value& key, std::size_t index, std::array<char, 24>& digits,
                            std::string& label) {
  if (key.is(Kind::kString)) return key.as_string();
  if (key.is(Kind::kInt)) {
    const auto written = std::to_chars(digits.data(), digits.data() + digits.size(), key.as_int());
    return {digits.data(), written.ptr};
  }
  label = entry_value_label(key, index);
  return label;
}

// `name.key` for an entry's value.
std::string entry_value_name(const std::string& name, const Value& key, std::size_t index) {
  std::array<char, 24> digits{};
  std::string label;
  return join(name, entry_part(key, index, digits, label));
}

// The names a walk lists, made in blocks that every name keeps alive (TensorName): one
// allocation per 4 KiB-4 MiB block instead of one per name, and none to free per name, which
// for the 100 000 names of an optimizer state was 3.5 ms of a 75-85 ms load.
class NameBlocks {
 public:
  NameBlocks() : arena_(std::make_shared<common::BumpArena>()) {}

  // join(prefix, part) as a TensorName. Throws std::bad_alloc.
  TensorName join(std::string_view prefix, std::string_view part) {
    const std::size_t size = joined_size(prefix, part);
    auto* text = static_cast<char*>(arena_->allocate(size + 1, 1));
    *write_joined(text, prefix, part) = '\0';
    return internal::Access::block_name(arena_, text, size);
  }
  TensorName copy(std::string_view text) { return join({}, text); }

 private:
  std::shared_ptr<common::BumpArena> arena_;
};

// The walk marks each tensor node it lists (pickle::Value::set_walk_mark), and each plain
// container (dict, list, tuple, set) it dealt with all the contents of: scalars, tensors it
// listed, containers it marked. The audit, which would find nothing below either, skips both —
// for an optimizer state or a plain dict of tensors, the whole tree.
constexpr std::uint8_t kListedMark = 1;
constexpr std::uint8_t kCoveredMark = 2;

// Holds no tensor the audit could find: a scalar, or what the walk marked.
bool is_settled(const Value& value) noexcept {
  return value.walk_mark() != 0 || (!may_hold_tensors(value) && !value.is(Kind::kPersistent));
}

// Whether the walk left nothing below `value` for the audit. Called once the walk is done with
// its contents; a container with BUILD states, bare storages, unwalked keys (a tuple key that
// has a text) or members the walk skipped as a cycle is not covered, and the audit walks it.
bool covered_by_walk(const Value& value) noexcept {
  if (!value.states().empty()) return false;
  switch (value.kind()) {
    case Kind::kDict: {
      const auto entries = value.dict_items();
      return std::all_of(entries.begin(), entries.end(), [](const DictItem& entry) {
        return is_settled(*entry.key) && is_settled(*entry.value);
      });
    }
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kSet:
    case Kind::kFrozenSet: {
      const auto items = value.items();
      return std::all_of(items.begin(), items.end(),
                         [](const Value* item) { return is_settled(*item); });
    }
    default:
      return false;
  }
}

struct Frame {
  const Value* value;  // nullptr marks leaving `leaving`
  const Value* leaving;
  std::string name;
  std::size_t depth;
};

// The bytes the tensor list, the opaque values and the walk's pending names may take
// (kTensorListBytesPerPickleByte): what a pickle that refers to one tensor a million times, under
// a long name or with 64 dimensions, would make pthload allocate.
class ListBudget {
 public:
  explicit ListBudget(std::size_t pickle_bytes)
      : budget_(per_pickle_byte(pickle_bytes, kTensorListBytesPerPickleByte, kMinTensorListBytes)),
        left_(budget_) {}

  void charge(std::size_t bytes) {
    if (bytes > left_) exceeded();
    left_ -= bytes;
  }
  void charge_name(const std::string& name) { charge(name.size()); }
  void charge_listing(const NamedTensor& listed) {
    charge(sizeof(NamedTensor) + listed.name.size() + shape_bytes(listed.tensor));
  }

 private:
  [[noreturn]] void exceeded() const {
    throw FormatError(Errc::kTorchLimitExceeded,
                      fmt::format("the tensors' names and shapes would take more than {} bytes "
                                  "({} per pickle byte, at least {}): the pickle refers to its "
                                  "tensors far more often, or under far longer names, than it "
                                  "writes them",
                                  budget_, kTensorListBytesPerPickleByte, kMinTensorListBytes));
  }

  std::uint64_t budget_;
  std::uint64_t left_;
};

class Walker {
 public:
  Walker(TensorBuilder& builder, const Limits& limits, std::size_t step_budget,
         ListBudget& list_budget, internal::TensorList& out, std::vector<OpaqueValue>& opaque)
      : builder_(builder),
        limits_(limits),
        out_(out),
        opaque_(opaque),
        step_budget_(step_budget),
        list_budget_(list_budget) {}

  void run(const Value& root) {
    stack_.push_back({&root, nullptr, std::string(), 0});
    while (!stack_.empty()) {
      Frame frame = std::move(stack_.back());
      stack_.pop_back();
      if (frame.value == nullptr) {
        on_path_.erase(frame.leaving);
        if (covered_by_walk(*frame.leaving)) frame.leaving->set_walk_mark(kCoveredMark);
        continue;
      }
      charge_step();
      visit(*frame.value, std::move(frame.name), frame.depth);
    }
  }

 private:
  // Lists `value` under `name` if it is a tensor (then its parts) or a tensor-like value left
  // opaque, taking the name; returns false, having listed nothing, for anything else.
  bool list_if_tensor(const Value& value, std::string& name) {
    // Rebuilt while the pickle ran, and already where the list would put it: named there.
    if (NamedTensor* listed = builder_.listed_in_place(value)) {
      name_in_place(*listed, value, {}, name);
      return true;
    }
    if (auto tensor = builder_.tensor_of(value)) {
      value.set_walk_mark(kListedMark);
      // From here on the walk adds to the list itself.
      builder_.end_in_place_listing();
      if (!internal::Access::has_extras(*tensor)) {
        // No parts to name: the case of (almost) every tensor.
        list_budget_.charge(sizeof(NamedTensor) + shape_bytes(*tensor));
        out_.push_back({names_.copy(name), std::move(*tensor)});
        return true;
      }
      // A sparse tensor is listed, then its parts (DESIGN.md's schema: `<name>.indices`...).
      const auto parts = tensor->parts();
      const auto part_names = sparse_part_names(tensor->layout());
      for (std::size_t i = 0; i < parts.size(); ++i) {
        // A nested tensor's components are named by their index: `<name>.0`, `<name>.1`...
        if (tensor->layout() == Layout::kNested) {
          parts_.push_back({names_.join(name, std::to_string(i)), parts[i]});
        } else if (i < part_names.size()) {
          parts_.push_back({names_.join(name, part_names[i]), parts[i]});
        }
      }
      // The name was charged when the child was added (add_child); the entry and shape now.
      list_budget_.charge(sizeof(NamedTensor) + shape_bytes(*tensor));
      out_.push_back({names_.copy(name), std::move(*tensor)});
      for (auto& part : parts_) {
        list_budget_.charge_listing(part);
        out_.push_back(std::move(part));
      }
      parts_.clear();
      return true;
    }
    if (auto reason = builder_.take_opaque_reason()) {
      list_budget_.charge(sizeof(OpaqueValue) + reason->size());
      opaque_.push_back({std::move(name), std::move(*reason)});
      return true;
    }
    return false;
  }

  void visit(const Value& value, std::string name, std::size_t depth) {
    if (list_if_tensor(value, name)) return;
    if (on_path_.contains(&value)) return;  // a cycle
    if (depth >= limits_.max_pickle_nesting) {
      throw FormatError(Errc::kTorchLimitExceeded,
                        fmt::format("objects nest deeper than {} (Limits::max_pickle_nesting)",
                                    limits_.max_pickle_nesting));
    }
    children_.clear();
    switch (value.kind()) {
      case Kind::kDict: {
        std::size_t index = 0;
        add_entries(value.dict_items(), name, index);
        break;
      }
      case Kind::kList:
      case Kind::kTuple:
      case Kind::kSet:
      case Kind::kFrozenSet:
        // A set's members by their position in the pickle: Python's own order for a set of
        // tensors is their hash order, which changes from run to run.
        add_items(value.items(), name, 0);
        break;
      case Kind::kCall:
        add_object(value, name);
        break;
      default:
        return;  // scalars, strings, globals, bare storages: no tensors to name
    }
    if (children_.empty()) {
      if (covered_by_walk(value)) value.set_walk_mark(kCoveredMark);
      return;
    }
    on_path_.insert(&value);
    stack_.push_back({nullptr, &value, std::string(), depth});
    // Pushed in reverse so they are visited in container order.
    for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
      it->depth = depth + 1;
      stack_.push_back(std::move(*it));
    }
  }

  // Each child looked at costs a step, whether it is walked or skipped as a scalar: a list of
  // 300 000 Nones fetched 300 000 times must exhaust the budget, not loop for hours.
  void charge_step() {
    if (++steps_ > step_budget_) {
      throw FormatError(Errc::kTorchLimitExceeded,
                        fmt::format("naming tensors took more than {} steps (8 per pickle "
                                    "byte, at most Limits::max_pickle_values): too many "
                                    "shared paths",
                                    step_budget_));
    }
  }

  void add(const Value& child, std::string name) {
    charge_step();
    if (may_hold_tensors(child)) add_child(child, std::move(name));
  }

  // A child the walk must visit. While no earlier sibling waits to be walked, a tensor is listed
  // at once: it would be the next value visited, so the order is the same, and its frame is not
  // made, moved and popped (100 000 of them in an optimizer state). It costs the step run()
  // charges for each frame it visits; a child that is no tensor is pushed, and charged then.
  void add_child(const Value& child, std::string name) {
    // Kept in a frame or in the list: either way it stays until the walk ends or moves it on.
    list_budget_.charge_name(name);
    if (children_.empty() && (builder_.is_next_in_place(child) || child.is(Kind::kCall))) {
      charge_step();
      if (list_if_tensor(child, name)) return;
      --steps_;
    }
    children_.push_back({&child, nullptr, std::move(name), 0});
  }

  // What add_child does for the next tensor named in place, its name made in names_ straight
  // from the parent's name and the key: not built as a string first (an optimizer state's
  // 100 000 names).
  void list_next_in_place(const Value& key, const Value& item, const std::string& name,
                          std::size_t index) {
    NamedTensor* listed = builder_.listed_in_place(item);
    if (listed == nullptr) {  // is_next_in_place says it cannot be; listed as any child then
      add_child(item, entry_value_name(name, key, index));
      return;
    }
    std::array<char, 24> digits{};
    std::string label;
    const std::string_view part = entry_part(key, index, digits, label);
    list_budget_.charge(joined_size(name, part));
    charge_step();
    name_in_place(*listed, item, name, part);
  }

  // Names `listed`, the tensor `value` the worker rebuilt where the list holds it, join(prefix,
  // part); its entry and shape are charged first (its name was, when it was added).
  void name_in_place(NamedTensor& listed, const Value& value, std::string_view prefix,
                     std::string_view part) {
    value.set_walk_mark(kListedMark);
    list_budget_.charge(sizeof(NamedTensor) + shape_bytes(listed.tensor));
    listed.name = names_.join(prefix, part);
  }

  // Elements named by their index, counting from `first`; returns the next index.
  std::size_t add_items(std::span<const Value* const> items, const std::string& name,
                        std::size_t first) {
    for (const Value* item : items) {
      charge_step();
      if (may_hold_tensors(*item)) add_child(*item, join(name, std::to_string(first)));
      ++first;
    }
    return first;
  }

  // Entries named by the key's text (pickle::key_text); a key without one names its value
  // `<value N>`, N the entry's position in this dict, and a key that may hold tensors (a tensor,
  // a tuple, an object) is walked as `<key N>`.
  void add_entries(std::span<const DictItem> entries, const std::string& name, std::size_t& index) {
    for (const auto& [key, item] : entries)
      add_entry(*key, *item, name, index++);
  }

  void add_entry(const Value& key, const Value& item, const std::string& name, std::size_t index) {
    charge_step();
    // The next tensor to name in place is known by its address: its node, written long before
    // and out of cache, is not read to learn that it is a call.
    if (children_.empty() && builder_.is_next_in_place(item)) {
      list_next_in_place(key, item, name, index);
    } else if (builder_.is_next_in_place(item) || may_hold_tensors(item)) {
      add_child(item, entry_value_name(name, key, index));
    }
    // A key with a text (strings, numbers, bytes, tuples of those) holds no tensor; a tensor,
    // an object or a tuple holding one is walked as `<key N>`.
    if (may_hold_tensors(key) && !pickle::key_text(key)) {
      add_child(key, join(name, fmt::format("<key {}>", index)));
    }
  }

  // What dict(source) and OrderedDict(source) take: a mapping, or an iterable of (key, value)
  // pairs (Python 2's OrderedDict.__reduce__ pickled a list of [key, value] lists). Returns
  // false, adding nothing, for anything else.
  bool add_pairs(const Value& source, const std::string& name, std::size_t& index) {
    if (source.is(Kind::kDict)) {
      add_entries(source.dict_items(), name, index);
      return true;
    }
    if (source.is(Kind::kCall) && classify_global(source.callable()) == KnownGlobal::kDictLike) {
      // dict(OrderedDict(pairs)): the inner mapping's entries, in its order. Its own source is
      // taken when the walk reaches it, so this does not recurse.
      list_budget_.charge_name(name);
      children_.push_back({&source, nullptr, name, 0});
      return true;
    }
    if (!is_sequence(source)) return false;
    const auto items = source.items();
    if (!std::all_of(items.begin(), items.end(),
                     [](const Value* item) { return as_pair(*item).has_value(); })) {
      return false;
    }
    for (const Value* item : items) {
      const DictItem pair = *as_pair(*item);
      add_entry(*pair.key, *pair.value, name, index++);
    }
    return true;
  }

  void add_object(const Value& object, const std::string& name) {
    const KnownGlobal kind = classify_global(object.callable());
    const auto args = object.args().items();
    switch (kind) {
      case KnownGlobal::kDictLike:
        add_dict_like(object, name);
        return;
      case KnownGlobal::kSetLike:
      case KnownGlobal::kSequenceLike: {
        // set(members), list(iterable): the members first, then what ADDITEMS / APPENDS added.
        std::size_t index = 0;
        if (!args.empty() && is_sequence(*args[0])) {
          index = add_items(args[0]->items(), name, 0);
        } else if (!args.empty()) {
          add(*args[0], join(name, "<arg 0>"));
        }
        index = add_items(object.items(), name, index);
        add_items(object.added_items(), name, index);
        return;
      }
      case KnownGlobal::kReconstructor:
        add_reconstructed(object, name);
        return;
      case KnownGlobal::kRebuildFromType:
        add_jagged_parts(object, name);
        return;
      case KnownGlobal::kJitListBuilder:
        // The list (or tagged value) stands in the call's place, under the call's name.
        if (!args.empty()) add(*args[0], name);
        return;
      case KnownGlobal::kSize:
      case KnownGlobal::kDtype:
      case KnownGlobal::kGetLayout:
      case KnownGlobal::kNumpyDtype:
        return;
      default:
        add_opaque(object, name);
        return;
    }
  }

  // OrderedDict(source), dict(source, **kwargs), Counter(source), defaultdict(factory, source),
  // then SETITEMS. BUILD states (a state_dict's `_metadata`) are the dict's attributes, not its
  // items, and are not named (the audit still finds any tensor in them).
  void add_dict_like(const Value& object, const std::string& name) {
    const auto args = object.args().items();
    const bool is_defaultdict = object.callable().name() == "defaultdict";
    std::size_t index = 0;
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (is_defaultdict && i == 0) continue;  // the default factory
      if (i == (is_defaultdict ? 1 : 0) && add_pairs(*args[i], name, index)) continue;
      add(*args[i], join(name, fmt::format("<arg {}>", i)));
    }
    if (const Value* kwargs = object.kwargs(); kwargs != nullptr && kwargs->is(Kind::kDict)) {
      add_entries(kwargs->dict_items(), name, index);
    }
    add_entries(object.dict_items(), name, index);
  }

  // copyreg._reconstructor(cls, base, state) is base.__new__(cls, state) (then BUILD): a list,
  // tuple or dict subclass holds its elements in `state`; an object holds nothing there.
  void add_reconstructed(const Value& object, const std::string& name) {
    const auto args = object.args().items();
    const KnownGlobal base = args.size() > 1 ? classify_global(*args[1]) : KnownGlobal::kOther;
    if (args.size() > 2 && base == KnownGlobal::kSequenceLike && is_sequence(*args[2])) {
      const std::size_t next = add_items(args[2]->items(), name, 0);
      add_items(object.items(), name, next);
    } else if (args.size() > 2 && base == KnownGlobal::kDictLike) {
      std::size_t index = 0;
      if (!add_pairs(*args[2], name, index)) add(*args[2], join(name, "<arg 2>"));
      add_entries(object.dict_items(), name, index);
    } else {
      for (std::size_t i = 2; i < args.size(); ++i)
        add(*args[i], join(name, fmt::format("<arg {}>", i)));
      add_state_and_items(object, name);
    }
  }

  // An object of a class pthload does not interpret: the arguments it was made from by
  // position (so a namedtuple built by NEWOBJ names its fields `0`, `1`, as its tuple does),
  // NEWOBJ_EX's keyword arguments by name, its BUILD states as its attributes, and what
  // APPENDS / SETITEMS / ADDITEMS gave a list, dict or set subclass.
  void add_opaque(const Value& object, const std::string& name) {
    add_items(object.args().items(), name, 0);
    if (const Value* kwargs = object.kwargs(); kwargs != nullptr) {
      if (kwargs->is(Kind::kDict)) {
        std::size_t index = 0;
        add_entries(kwargs->dict_items(), name, index);
      } else {
        add(*kwargs, join(name, "<kwargs>"));
      }
    }
    add_state_and_items(object, name);
  }

  void add_state_and_items(const Value& object, const std::string& name) {
    // Each BUILD in turn: a dict of attributes, a (dict, slots) pair, or any other state, which
    // __setstate__ receives whole and which is walked in the object's place.
    for (const Value* state : object.states()) {
      if (state->is(Kind::kDict)) {
        std::size_t index = 0;
        add_entries(state->dict_items(), name, index);
      } else if (is_attribute_pair(*state)) {
        for (const Value* part : state->items()) {
          std::size_t index = 0;
          if (part->is(Kind::kDict)) add_entries(part->dict_items(), name, index);
        }
      } else {
        add(*state, name);
      }
    }
    std::size_t entry = 0;
    add_entries(object.dict_items(), name, entry);
    const std::size_t next = add_items(object.items(), name, 0);
    add_items(object.added_items(), name, next);
  }

  // pickle's (state, slotstate) form of a BUILD state: each a dict or None.
  static bool is_attribute_pair(const Value& state) noexcept {
    if (!state.is(Kind::kTuple) || state.items().size() != 2) return false;
    return std::all_of(state.items().begin(), state.items().end(), [](const Value* part) {
      return part->is(Kind::kDict) || part->is(Kind::kNone);
    });
  }

  // _rebuild_from_type_v2(_rebuild_njt, NestedTensor, ({'values': ..., 'offsets': ...,
  // 'lengths': ..., '_metadata_cache': {...}},), state): the NJT's fields as attributes, so
  // `<name>.values`, `<name>.offsets`, `<name>.lengths` and the tensors torch caches in
  // `<name>._metadata_cache` (torch/nested/_internal/nested_tensor.py NestedTensor.__reduce_ex__).
  void add_jagged_parts(const Value& object, const std::string& name) {
    const auto args = object.args().items();
    if (args.size() < 3 || classify_global(*args[0]) != KnownGlobal::kRebuildJagged ||
        !args[2]->is(Kind::kTuple) || args[2]->items().empty() ||
        !args[2]->items()[0]->is(Kind::kDict)) {
      add_opaque(object, name);
      return;
    }
    std::size_t index = 0;
    add_entries(args[2]->items()[0]->dict_items(), name, index);
  }

  TensorBuilder& builder_;
  const Limits& limits_;
  internal::TensorList& out_;
  std::vector<OpaqueValue>& opaque_;
  std::vector<Frame> stack_;
  std::vector<Frame> children_;
  std::vector<NamedTensor> parts_;
  std::unordered_set<const Value*> on_path_;
  NameBlocks names_;
  std::size_t step_budget_;
  std::size_t steps_ = 0;
  ListBudget& list_budget_;
};

// The audit: every node reachable from the root, each once, looking for a tensor the walk did not
// list. It knows no naming rule, so a gap in the rules cannot hide a tensor from it; what it
// finds is listed under its path, written with the audit's own labels.
class Audit {
 public:
  Audit(TensorBuilder& builder, std::size_t name_budget, ListBudget& list_budget,
        internal::TensorList& out)
      : builder_(builder), name_budget_(name_budget), list_budget_(list_budget), out_(out) {}

  std::size_t run(const Value& root) {
    stack_.push_back({&root, kNoParent, {}});
    while (!stack_.empty()) {
      const Pending pending = stack_.back();
      stack_.pop_back();
      const Value& value = *pending.value;
      if (value.walk_mark() != 0) continue;  // listed, or covered by the walk
      if (!visited_.insert(&value).second) continue;
      if (value.is(Kind::kCall)) {
        if (auto tensor = builder_.tensor_of(value)) {
          out_.push_back({fallback_name(pending), std::move(*tensor)});
          list_budget_.charge_listing(out_.back());
          ++found_;
          continue;
        }
        // A numpy array the walk left opaque (an object array) may hold tensors: look inside.
        (void)builder_.take_opaque_reason();
      }
      const auto parent = static_cast<std::uint32_t>(nodes_.size());
      nodes_.push_back({pending.parent, pending.edge});
      push_children(value, parent);
    }
    return found_;
  }

 private:
  static constexpr std::uint32_t kNoParent = UINT32_MAX;
  // How a node was reached from its parent; written out only for a tensor the walk missed.
  struct Edge {
    enum class Type : std::uint8_t {
      kIndex,
      kValue,
      kKey,
      kCallable,
      kArg,
      kKwargs,
      kState,
      kItem,
      kAdded,
      kPersistentId,
    };
    Type type = Type::kIndex;
    std::uint32_t index = 0;
    const Value* key = nullptr;
  };
  struct Pending {
    const Value* value;
    std::uint32_t parent;
    Edge edge;
  };
  struct Node {
    std::uint32_t parent;
    Edge edge;
  };

  void push(const Value* child, std::uint32_t parent, Edge edge) {
    if (may_hold_tensors(*child) || child->is(Kind::kPersistent)) {
      stack_.push_back({child, parent, edge});
    }
  }

  void push_sequence(std::span<const Value* const> items, std::uint32_t parent, Edge::Type type) {
    // Reversed, so that the first tensor found is the first in pickle order.
    for (std::size_t i = items.size(); i-- > 0;)
      push(items[i], parent, {type, static_cast<std::uint32_t>(i), nullptr});
  }

  void push_entries(std::span<const DictItem> entries, std::uint32_t parent) {
    for (std::size_t i = entries.size(); i-- > 0;) {
      const auto index = static_cast<std::uint32_t>(i);
      push(entries[i].key, parent, {Edge::Type::kKey, index, nullptr});
      push(entries[i].value, parent, {Edge::Type::kValue, index, entries[i].key});
    }
  }

  void push_children(const Value& value, std::uint32_t parent) {
    const auto states = value.states();
    for (std::size_t i = states.size(); i-- > 0;)
      push(states[i], parent, {Edge::Type::kState, static_cast<std::uint32_t>(i), nullptr});
    switch (value.kind()) {
      case Kind::kTuple:
      case Kind::kList:
      case Kind::kSet:
      case Kind::kFrozenSet:
        push_sequence(value.items(), parent, Edge::Type::kIndex);
        break;
      case Kind::kDict:
        push_entries(value.dict_items(), parent);
        break;
      case Kind::kCall:
        push_sequence(value.added_items(), parent, Edge::Type::kAdded);
        push_entries(value.dict_items(), parent);
        push_sequence(value.items(), parent, Edge::Type::kItem);
        if (value.kwargs() != nullptr)
          push(value.kwargs(), parent, {Edge::Type::kKwargs, 0, nullptr});
        push_sequence(value.args().items(), parent, Edge::Type::kArg);
        push(&value.callable(), parent, {Edge::Type::kCallable, 0, nullptr});
        break;
      case Kind::kPersistent:
        push(&value.persistent_id(), parent, {Edge::Type::kPersistentId, 0, nullptr});
        break;
      default:
        break;
    }
  }

  static std::string label(const Edge& edge) {
    switch (edge.type) {
      case Edge::Type::kIndex:
        return std::to_string(edge.index);
      case Edge::Type::kValue: {
        // A long key is left out, unbuilt: the name says where the tensor was, and must not
        // cost a copy of a large key per tensor found under it (150 000 tensors under a 3 MB
        // key took 11 s).
        if (auto text = pickle::key_text(*edge.key, kMaxLabelBytes)) return std::move(*text);
        return fmt::format("<value {}>", edge.index);
      }
      case Edge::Type::kKey:
        return fmt::format("<key {}>", edge.index);
      case Edge::Type::kCallable:
        return "<callable>";
      case Edge::Type::kArg:
        return fmt::format("<arg {}>", edge.index);
      case Edge::Type::kKwargs:
        return "<kwargs>";
      case Edge::Type::kState:
        return edge.index == 0 ? "<state>" : fmt::format("<state {}>", edge.index);
      case Edge::Type::kItem:
        return fmt::format("<item {}>", edge.index);
      case Edge::Type::kAdded:
        return fmt::format("<added {}>", edge.index);
      case Edge::Type::kPersistentId:
        return "<persistent id>";
    }
    return "<?>";
  }

  // The path from the root, at most kMaxLabels steps (the last ones, after `<...>`), while the
  // names made so far stay within the budget; past it, `<unreached N>`.
  std::string fallback_name(const Pending& pending) {
    std::vector<std::string> labels{label(pending.edge)};
    std::uint32_t at = pending.parent;
    bool cut = false;
    while (at != kNoParent && nodes_[at].parent != kNoParent) {
      if (labels.size() == kMaxLabels) {
        cut = true;
        break;
      }
      labels.push_back(label(nodes_[at].edge));
      at = nodes_[at].parent;
    }
    if (pending.parent == kNoParent) labels.clear();  // the root itself is a tensor
    std::string name = cut ? "<...>" : "";
    for (auto it = labels.rbegin(); it != labels.rend(); ++it)
      name = join(name, *it);
    if (name_bytes_ + name.size() > name_budget_) name = fmt::format("<unreached {}>", found_);
    name_bytes_ += name.size();
    return name;
  }

  static constexpr std::size_t kMaxLabels = 16;
  static constexpr std::size_t kMaxLabelBytes = 64;

  TensorBuilder& builder_;
  std::unordered_set<const Value*> visited_;
  std::vector<Pending> stack_;
  std::vector<Node> nodes_;
  std::size_t name_budget_;
  std::size_t name_bytes_ = 0;
  ListBudget& list_budget_;
  std::size_t found_ = 0;
  internal::TensorList& out_;
};

}  // namespace

std::size_t walk_step_budget(std::size_t pickle_bytes, const Limits& limits) noexcept {
  // A 1 KB pickle of shared lists names 2^40 paths; under max_pickle_values alone (200 M steps by
  // default) it listed tens of GB of names before failing.
  const std::uint64_t budget =
      per_pickle_byte(pickle_bytes, kWalkStepsPerPickleByte, kMinWalkSteps);
  return static_cast<std::size_t>(std::min<std::uint64_t>(budget, limits.max_pickle_values));
}

std::size_t collect_named_tensors(const Value& root, std::size_t pickle_bytes,
                                  TensorBuilder& builder, const Limits& limits,
                                  internal::TensorList& out, std::vector<OpaqueValue>& opaque) {
  ListBudget list_budget(pickle_bytes);
  try {
    Walker(builder, limits, walk_step_budget(pickle_bytes, limits), list_budget, out, opaque)
        .run(root);
  } catch (...) {
    // The list keeps what the walk named before it failed, as without a worker; the tensors
    // rebuilt beside the pickle that it did not reach go.
    builder.abandon_in_place_listing();
    throw;
  }
  // Tensors rebuilt beside the pickle that the walk did not reach leave the list: the audit
  // takes them by call if it finds them.
  builder.end_in_place_listing();
  const auto name_budget = static_cast<std::size_t>(
      per_pickle_byte(pickle_bytes, kFallbackNameBytesPerPickleByte, kMinFallbackNameBytes));
  return Audit(builder, name_budget, list_budget, out).run(root);
}

}  // namespace pthload::torch
