// data.pkl as torch.save pickles a dict of tensors (torch/_tensor.py __reduce_ex__,
// torch/serialization.py _save's persistent_id): each tensor
// `_rebuild_tensor_v2(('storage', torch.FloatStorage, key, location, numel), offset, size,
// stride, requires_grad, OrderedDict())`, or `_rebuild_tensor_v3(..., dtype)` over a
// `torch.storage.UntypedStorage` for the dtypes without a storage class. Memoized as CPython
// does, so a flat state dict of CPU tensors comes out byte for byte as torch.save's.
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "pickle/text.hpp"
#include "pthload/error.hpp"
#include "writer/pickler.hpp"
#include "writer/plan.hpp"

namespace pthload::writer {

std::string_view legacy_storage_class(Dtype dtype) noexcept {
  switch (dtype) {
    case Dtype::kFloat64:
      return "DoubleStorage";
    case Dtype::kFloat32:
      return "FloatStorage";
    case Dtype::kFloat16:
      return "HalfStorage";
    case Dtype::kBFloat16:
      return "BFloat16Storage";
    case Dtype::kComplex64:
      return "ComplexFloatStorage";
    case Dtype::kComplex128:
      return "ComplexDoubleStorage";
    case Dtype::kBool:
      return "BoolStorage";
    case Dtype::kInt8:
      return "CharStorage";
    case Dtype::kInt16:
      return "ShortStorage";
    case Dtype::kInt32:
      return "IntStorage";
    case Dtype::kInt64:
      return "LongStorage";
    case Dtype::kUInt8:
      return "ByteStorage";
    default:
      return {};
  }
}

namespace {

// The dict the names make: flat, or nested by dots. Children keep the order names first
// reach them.
struct Node {
  std::size_t tensor = SIZE_MAX;  // a leaf: the tensor's index in the plan
  std::vector<std::pair<std::string, std::unique_ptr<Node>>> children;
  std::map<std::string, std::size_t, std::less<>> index;  // child name → position
};

[[noreturn]] void collision(const std::string& what) {
  throw FormatError(Errc::kSaveNameCollision, what);
}

void check_utf8(std::string_view name) {
  if (pickle::text::is_ascii(name)) return;
  if (pickle::text::check_utf8(name) != pickle::text::Utf8::kValid) {
    throw FormatError(
        Errc::kSaveBadTensor,
        fmt::format("tensor name '{}' is not valid UTF-8; torch.load decodes names as UTF-8",
                    name));
  }
}

void check_flat_names(const Plan& plan) {
  std::unordered_set<std::string_view> names;
  names.reserve(plan.tensors.size());
  for (const PlannedTensor& tensor : plan.tensors) {
    check_utf8(tensor.name);
    if (!names.insert(tensor.name).second) {
      collision(fmt::format("two tensors are named '{}'; a dict holds one per name", tensor.name));
    }
  }
}

// Nested dicts by the dots of the names.
Node build_tree(const Plan& plan) {
  Node root;
  for (std::size_t t = 0; t < plan.tensors.size(); ++t) {
    const std::string_view name = plan.tensors[t].name;
    check_utf8(name);
    Node* node = &root;
    std::size_t start = 0;
    while (true) {
      const std::size_t dot = name.find('.', start);
      const std::string_view part = name.substr(start, dot - start);
      auto found = node->index.find(part);
      if (found == node->index.end()) {
        if (node->tensor != SIZE_MAX) {
          collision(fmt::format("tensor '{}' is nested under '{}', which is a tensor", name,
                                plan.tensors[node->tensor].name));
        }
        found = node->index.emplace(std::string(part), node->children.size()).first;
        node->children.emplace_back(std::string(part), std::make_unique<Node>());
      }
      Node* child = node->children[found->second].second.get();
      if (dot == std::string_view::npos) {
        if (child->tensor != SIZE_MAX) {
          collision(fmt::format("two tensors are named '{}'; a dict holds one per name", name));
        }
        if (!child->children.empty()) {
          collision(fmt::format("tensor '{}' is also the dict of tensors under '{}.'", name, name));
        }
        child->tensor = t;
        break;
      }
      node = child;
      start = dot + 1;
    }
  }
  return root;
}

class DataPickle {
 public:
  explicit DataPickle(const Plan& plan) : plan_(plan), memo_(plan.tensors.size(), kNotPickled) {}

  std::string take() {
    pickler_.stop();
    return pickler_.take();
  }

  // A dict of `count` entries: key(i) and value(i) push each. CPython's _batch_setitems: runs
  // of up to 1000 pairs, SETITEM for a run of one.
  template <typename Key, typename Value>
  void dict(std::size_t count, const Key& key, const Value& value) {
    pickler_.empty_dict();
    constexpr std::size_t kBatch = 1000;
    for (std::size_t first = 0; first < count; first += kBatch) {
      const std::size_t run = std::min(kBatch, count - first);
      if (run > 1) pickler_.mark();
      for (std::size_t i = first; i < first + run; ++i) {
        pickler_.text(key(i));
        value(i);
      }
      if (run > 1) {
        pickler_.setitems();
      } else {
        pickler_.setitem();
      }
    }
  }

  void dict(const Node& node) {
    dict(
        node.children.size(),
        [&](std::size_t i) { return std::string_view(node.children[i].first); },
        [&](std::size_t i) { value(*node.children[i].second); });
  }

  // The plan's tensors by their full names, in the plan's order: no tree to build.
  void flat_dict() {
    dict(
        plan_.tensors.size(), [&](std::size_t i) { return plan_.tensors[i].name; },
        [&](std::size_t i) { tensor(i); });
  }

  void value(const Node& node) {
    if (node.tensor != SIZE_MAX) {
      tensor(node.tensor);
    } else {
      dict(node);
    }
  }

  void tensor(std::size_t index) {
    const PlannedTensor& tensor = plan_.tensors[index];
    // One object per group of names for the same tensor: the first one pickled (which, nested,
    // need not be the first in the plan) is written, the others refer back to it.
    const std::size_t group = tensor.same_as != SIZE_MAX ? tensor.same_as : index;
    if (memo_[group] != kNotPickled) {
      pickler_.get(memo_[group]);
      return;
    }
    const PlannedStorage& storage = plan_.storages[tensor.storage];
    const std::string_view storage_class = legacy_storage_class(tensor.dtype);
    pickler_.global("torch._utils",
                    storage_class.empty() ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
    pickler_.mark();
    // The persistent id ('storage', type, key, location, numel).
    pickler_.mark();
    pickler_.shared_text("storage", "storage");
    if (storage_class.empty()) {
      pickler_.global("torch.storage", "UntypedStorage");
    } else {
      pickler_.global("torch", storage_class);
    }
    pickler_.shared_text(fmt::format("key\n{}", storage.key), storage.key);
    pickler_.shared_text(fmt::format("location\n{}", storage.location), storage.location);
    const std::uint64_t numel =
        storage_class.empty() ? storage.nbytes : storage.nbytes / element_size(tensor.dtype);
    pickler_.integer(static_cast<std::int64_t>(numel));
    pickler_.tuple(5);
    pickler_.persistent_id();
    pickler_.integer(tensor.storage_offset);
    ints(tensor.sizes);
    ints(tensor.strides);
    pickler_.boolean(tensor.requires_grad);
    pickler_.global("collections", "OrderedDict");  // backward hooks: none
    pickler_.tuple(0);
    pickler_.reduce();
    if (storage_class.empty()) pickler_.global("torch", dtype_name(tensor.dtype));
    pickler_.tuple(storage_class.empty() ? 7 : 6);
    pickler_.reduce();
    memo_[group] = pickler_.last_memo();
  }

 private:
  void ints(const std::vector<std::int64_t>& values) {
    if (values.size() > 3) pickler_.mark();
    for (const auto value : values)
      pickler_.integer(value);
    pickler_.tuple(values.size());
  }

  static constexpr std::uint32_t kNotPickled = UINT32_MAX;

  const Plan& plan_;
  Pickler pickler_;
  std::vector<std::uint32_t> memo_;  // first tensor of a group → the memo entry of its REDUCE
};

// The tensors in the order the pickle holds them: the tree's, depth first.
void pickled_order(const Node& node, std::vector<std::size_t>& order) {
  if (node.tensor != SIZE_MAX) order.push_back(node.tensor);
  for (const auto& [name, child] : node.children)
    pickled_order(*child, order);
}

// torch.save numbers storages and writes their records in the order the pickle first names
// them, and torch.load's calculate_storage_offsets predicts each record's place from that order
// (data/0 first, then each in turn): nesting regroups the names, so the plan's storages are
// renumbered and reordered to the pickle's order.
void order_storages_as_pickled(Plan& plan, std::span<const std::size_t> order) {
  std::vector<std::size_t> new_index(plan.storages.size(), SIZE_MAX);
  std::vector<PlannedStorage> storages;
  storages.reserve(plan.storages.size());
  for (const std::size_t t : order) {
    const std::size_t old = plan.tensors[t].storage;
    if (new_index[old] != SIZE_MAX) continue;
    new_index[old] = storages.size();
    storages.push_back(std::move(plan.storages[old]));
    storages.back().key = fmt::to_string(new_index[old]);
  }
  for (PlannedTensor& tensor : plan.tensors)
    tensor.storage = new_index[tensor.storage];
  plan.storages = std::move(storages);
}

}  // namespace

std::string data_pickle(Plan& plan, const SaveOptions& options) {
  if (!options.nest_dotted_names) {
    // Flat: the storages are already numbered in the order the tensors name them.
    check_flat_names(plan);
    DataPickle pickle(plan);
    // torch.save(tensor) pickles the tensor itself: a checkpoint of one unnamed tensor (its
    // root) is written back that way.
    if (plan.tensors.size() == 1 && plan.tensors.front().name.empty()) {
      pickle.tensor(0);
    } else {
      pickle.flat_dict();
    }
    return pickle.take();
  }
  const Node root = build_tree(plan);
  std::vector<std::size_t> order;
  order.reserve(plan.tensors.size());
  pickled_order(root, order);
  order_storages_as_pickled(plan, order);
  DataPickle pickle(plan);
  pickle.dict(root);
  return pickle.take();
}

}  // namespace pthload::writer
