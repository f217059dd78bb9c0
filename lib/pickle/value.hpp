// The value tree the pickle machine builds, and the arena that owns it. What each opcode makes
// follows CPython's unpickler (Lib/pickle.py `_Unpickler`, Modules/_pickle.c); nothing is
// interpreted: a class instance is a Call of a Global, never an object of that class.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string_view>
#include <vector>

#include "common/assert.hpp"
#include "common/bump_arena.hpp"

namespace pthload::pickle {

/// What a Value is. Python's types, except that classes and functions are Globals and whatever
/// a pickle constructs through them (REDUCE, NEWOBJ, NEWOBJ_EX, INST, OBJ) is a Call.
enum class Kind : std::uint8_t {
  kNone,
  kBool,
  kInt,            ///< fits in int64
  kBigInt,         ///< does not fit in int64: two's-complement little-endian bytes
  kFloat,          ///< a Python float (IEEE double)
  kString,         ///< a Python str, as UTF-8 (see Value::has_surrogates)
  kPython2String,  ///< STRING/BINSTRING/SHORT_BINSTRING: a Python 2 str, 8-bit bytes whose
                   ///< decoding the reader chooses (torch.load decodes UTF-8)
  kBytes,
  kByteArray,
  kTuple,
  kList,
  kDict,  ///< entries in insertion order; a repeated key is kept (Python keeps the last value)
  kSet,
  kFrozenSet,
  kGlobal,      ///< GLOBAL/STACK_GLOBAL/INST's class: a module and a qualified name
  kCall,        ///< callable(*args, **kwargs), plus items and BUILD states applied to it
  kPersistent,  ///< PERSID/BINPERSID without a persistent_load callback: wraps the id
};

/// The Kind's name in lower case ("bigint", "python2-string", "call"). The view is static.
[[nodiscard]] std::string_view kind_name(Kind kind) noexcept;

class Value;
class ValueArena;

/// One dict entry (also an item SETITEM(S) gave a Call).
struct DictItem {
  const Value* key;
  const Value* value;
};

namespace detail {

/// An arena array that grows by doubling; the old block stays in the arena (at most as much
/// again as the final size). Sizes are 32-bit to keep bodies small; growing past that throws.
template <typename T>
struct GrowArray {
  T* data = nullptr;
  std::uint32_t size = 0;
  std::uint32_t capacity = 0;
  [[nodiscard]] std::span<const T> span() const noexcept { return {data, size}; }
};

/// What rarely happens to a value: ADDITEMS on a Call, BUILD, NEWOBJ_EX's keywords.
struct Extra {
  GrowArray<const Value*> added;   ///< ADDITEMS on a Call
  GrowArray<const Value*> states;  ///< BUILD
  const Value* kwargs = nullptr;   ///< NEWOBJ_EX's keyword arguments (Calls only)
};

/// What a list, dict, set or mutated Call accumulates after it was created.
struct Body {
  GrowArray<const Value*> items;  ///< APPEND(S); ADDITEMS for a set
  GrowArray<DictItem> entries;    ///< SETITEM(S)
  Extra* extra = nullptr;
};

}  // namespace detail

/// A node of the value tree. Values live in a ValueArena and are referenced by pointer; a memo
/// GET yields the same node again, so the tree is a graph that may share nodes and, through
/// lists, dicts, sets, Calls and BUILD states, contain cycles. Walk it iteratively or with a
/// depth bound. Accessors for another kind are bugs (asserted in debug builds). Every view
/// returned stays valid while the arena lives and, for values the machine made, while the
/// input bytes it ran on live (strings, bytes and names may be views into the input).
class Value {
 public:
  // A copy would lose what lies behind a tuple, Call or Global in its node (see call_body_slot):
  // values are only ever referred to by pointer.
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;

  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] bool is(Kind kind) const noexcept { return kind_ == kind; }

  /// kBool.
  [[nodiscard]] bool as_bool() const noexcept;
  /// kInt.
  [[nodiscard]] std::int64_t as_int() const noexcept;
  /// kFloat.
  [[nodiscard]] double as_float() const noexcept;
  /// kString: UTF-8 text; kPython2String: the raw 8-bit bytes as chars.
  [[nodiscard]] std::string_view as_string() const noexcept;
  /// kBytes, kByteArray, kPython2String; kBigInt: minimal two's-complement little-endian bytes.
  [[nodiscard]] std::span<const std::byte> as_bytes() const noexcept;
  /// kString: whether the text holds lone surrogates (U+D800-U+DFFF, each in its 3-byte form),
  /// which CPython pickles with 'surrogatepass' and which are therefore not strict UTF-8.
  [[nodiscard]] bool has_surrogates() const noexcept { return (flags_ & kHasSurrogates) != 0; }

  /// kGlobal: the module ("collections") and the qualified name ("OrderedDict"), as written:
  /// no Python 2 name mapping is applied.
  [[nodiscard]] std::string_view module() const noexcept;
  [[nodiscard]] std::string_view name() const noexcept;
  /// kGlobal: whether this is module.name.
  [[nodiscard]] bool is_global(std::string_view module, std::string_view name) const noexcept;

  /// kTuple, kFrozenSet: the elements; kList: the elements; kSet: the elements; kCall: what
  /// APPEND(S) added to it. Empty for anything else.
  [[nodiscard]] std::span<const Value* const> items() const noexcept;
  /// kDict: the entries; kCall: what SETITEM(S) added to it. Empty for anything else.
  [[nodiscard]] std::span<const DictItem> dict_items() const noexcept;
  /// kCall: what ADDITEMS added to it. Empty for anything else.
  [[nodiscard]] std::span<const Value* const> added_items() const noexcept;
  /// kList, kDict, kSet, kCall: the states BUILD applied, in order (usually none or one).
  [[nodiscard]] std::span<const Value* const> states() const noexcept;
  /// The last BUILD state, or nullptr.
  [[nodiscard]] const Value* state() const noexcept;

  /// kCall: what was called (a Global, usually).
  [[nodiscard]] const Value& callable() const noexcept;
  /// kCall: the positional arguments, a kTuple.
  [[nodiscard]] const Value& args() const noexcept;
  /// kCall: NEWOBJ_EX's keyword arguments (a kDict or a kCall), or nullptr.
  [[nodiscard]] const Value* kwargs() const noexcept;
  /// kCall: the opcode that made it (Opcode::kReduce, kNewObj, kNewObjEx, kInst or kObj).
  [[nodiscard]] std::uint8_t call_opcode() const noexcept { return opcode_; }

  /// kPersistent: the persistent id (for torch.save, a 5-tuple starting with 'storage').
  [[nodiscard]] const Value& persistent_id() const noexcept;

  /// How deeply containers nest below this value when it was last extended (1 for an empty
  /// container, 0 for a scalar). Exact for what picklers write; a container mutated after it
  /// was nested does not update its parents, so walkers must bound themselves too.
  [[nodiscard]] std::uint32_t depth() const noexcept { return depth_; }

  /// A mark a walk of the finished tree may leave on the values it has dealt with, so that a
  /// second walk can tell them apart without a set of 100 000 pointers (the torch layer marks
  /// the tensors it named, and its audit looks for unmarked ones). 0 until set. Not
  /// synchronised: only one thread may walk a tree that is being marked.
  void set_walk_mark(std::uint8_t mark) const noexcept { walk_mark_ = mark; }
  [[nodiscard]] std::uint8_t walk_mark() const noexcept { return walk_mark_; }

  /// Whether Python could hash this (dict keys and set elements must be hashable): false for
  /// lists, dicts, sets, bytearrays and tuples holding one of those.
  [[nodiscard]] bool is_hashable() const noexcept { return (flags_ & kUnhashable) == 0; }

  /// Whether the arena gives this one node for every equal value the pickle makes (a small int,
  /// a tuple of one or two of them), as Python shares its small ints: being immutable, the
  /// value is the same wherever it is met, but two of its places need not have been one object
  /// in the pickle, so its sharing says nothing of the pickle's.
  [[nodiscard]] bool is_shared_constant() const noexcept { return (flags_ & kSharedConstant) != 0; }

 private:
  friend class ValueArena;
  static constexpr std::uint8_t kUnhashable = 1;
  static constexpr std::uint8_t kHasSurrogates = 2;
  static constexpr std::uint8_t kSharedConstant = 4;

  struct Text {
    const char* data;
    std::size_t size;
  };
  struct Sequence {
    const Value* const* data;
    std::size_t size;
  };
  struct Name {
    const char* module;
    const char* name;
    std::uint32_t module_size;
    std::uint32_t name_size;
  };
  struct CallParts {
    const Value* callable;
    const Value* args;
  };

  explicit Value(Kind kind) noexcept : kind_(kind) {}
  [[nodiscard]] const detail::Body* body() const noexcept;
  // What a Value needs beyond 16 bytes lives right behind it, in the same node: a Call's Body
  // pointer (null until the Call is first mutated or gets kwargs) and a Global's Name. Few
  // values are either, and a wider union would cost every value 8 bytes.
  [[nodiscard]] detail::Body*& call_body_slot() noexcept {
    return *std::launder(reinterpret_cast<detail::Body**>(this + 1));
  }
  [[nodiscard]] detail::Body* call_body() const noexcept {
    return *std::launder(reinterpret_cast<detail::Body* const*>(this + 1));
  }
  [[nodiscard]] const Name& global_name() const noexcept {
    return *std::launder(reinterpret_cast<const Name*>(this + 1));
  }

  Kind kind_;
  std::uint8_t flags_ = 0;
  std::uint8_t opcode_ = 0;
  mutable std::uint8_t walk_mark_ = 0;  // in what was padding: a Value stays 24 bytes
  std::uint32_t depth_ = 0;
  union {
    bool boolean_;
    std::int64_t integer_;
    double real_;
    Text text_;
    Sequence sequence_;
    detail::Body* container_;
    CallParts call_;
    const Value* persistent_id_;
  };
};

/// Owns values and the memory they reference. Allocation is by blocks (a bump pointer), so a
/// pickle of 100 000 tensors costs a few dozen heap allocations, and nothing is freed before
/// the arena. Move-only; moving keeps every Value pointer valid.
class ValueArena {
 public:
  ValueArena();
  ValueArena(ValueArena&&) noexcept;
  ValueArena& operator=(ValueArena&&) noexcept;
  ValueArena(const ValueArena&) = delete;
  ValueArena& operator=(const ValueArena&) = delete;
  ~ValueArena();

  /// `size` uninitialised bytes aligned to `alignment` (a power of two, at most 16), valid
  /// until the arena is destroyed. Throws std::bad_alloc.
  [[nodiscard]] void* allocate(std::size_t size, std::size_t alignment);
  /// A copy of `text` in the arena.
  [[nodiscard]] std::string_view copy(std::string_view text);

  /// Shared, immutable singletons (Python's are too).
  [[nodiscard]] Value* none() const noexcept { return none_; }
  [[nodiscard]] Value* boolean(bool value) const noexcept { return value ? true_ : false_; }
  [[nodiscard]] Value* empty_tuple() const noexcept { return empty_tuple_; }

  /// An int; -5 to 256 are shared, like Python's.
  [[nodiscard]] Value* make_int(std::int64_t value);
  /// From two's-complement little-endian bytes of any length: a kInt when it fits, else a
  /// kBigInt holding the minimal bytes (copied).
  [[nodiscard]] Value* make_int_from_bytes(std::span<const std::byte> le_twos_complement);
  [[nodiscard]] Value* make_float(double value);
  /// A kString of the UTF-8 `text`, copied (make_string_view borrows: `text` must then
  /// outlive the arena). Neither validates; `has_surrogates` sets the flag of that name.
  [[nodiscard]] Value* make_string(std::string_view text, bool has_surrogates = false);
  [[nodiscard]] Value* make_string_view(std::string_view text, bool has_surrogates = false);
  /// kBytes, kByteArray or kPython2String over `bytes`, copied (make_bytes_view borrows).
  [[nodiscard]] Value* make_bytes(Kind kind, std::span<const std::byte> bytes);
  [[nodiscard]] Value* make_bytes_view(Kind kind, std::span<const std::byte> bytes);
  /// A kGlobal; the names are copied (make_global_view borrows). Names must be < 4 GiB.
  [[nodiscard]] Value* make_global(std::string_view module, std::string_view name);
  [[nodiscard]] Value* make_global_view(std::string_view module, std::string_view name);
  /// A kTuple or kFrozenSet of copies of the pointers in `elements`.
  [[nodiscard]] Value* make_tuple(std::span<Value* const> elements);
  [[nodiscard]] Value* make_frozenset(std::span<Value* const> elements);
  /// An empty kList, kDict or kSet.
  [[nodiscard]] Value* make_container(Kind kind);
  /// A kCall of `callable(*args, **kwargs)`; `args` must be a kTuple, `kwargs` may be null.
  [[nodiscard]] Value* make_call(std::uint8_t opcode, Value* callable, Value* args,
                                 Value* kwargs = nullptr);
  [[nodiscard]] Value* make_persistent(Value* id);

  /// Mutations the machine applies (APPEND, SETITEM, ADDITEMS, BUILD); each raises the
  /// target's depth. `target` must be a list, dict or set as fits, or a Call; checking kinds,
  /// hashability and limits is the caller's job.
  void append(Value& target, const Value* item);
  void append_many(Value& target, std::span<Value* const> items);
  void set_item(Value& target, const Value* key, const Value* value);
  /// Room for `count` more set_item() entries in `target` at once, for SETITEMS, which knows
  /// how many follow: one block of the final size instead of a doubling per entry. Does nothing
  /// where the entries would pass set_item()'s bound, so that set_item() still reports it.
  void reserve_entries(Value& target, std::size_t count);
  void add_item(Value& target, const Value* item);
  void add_state(Value& target, const Value* state);

  /// Values made so far (the singletons and shared small ints excluded).
  [[nodiscard]] std::size_t value_count() const noexcept { return value_count_; }
  /// Bytes obtained from the system so far.
  [[nodiscard]] std::size_t bytes_reserved() const noexcept { return memory_.bytes_reserved(); }
  /// Says the values to come will take about `bytes` (common::BumpArena::expect).
  void expect(std::size_t bytes) noexcept { memory_.expect(bytes); }

 private:
  // Values, a tuple's elements and a container's body: multiples of 8 bytes, aligned to 8, cut
  // from chunks of memory_ by a bump pointer that needs none of BumpArena's alignment steps.
  void* allocate_node(std::size_t size);
  void* allocate_node_slow(std::size_t size);
  // A value of `kind`, counted, with `behind` more bytes of its node right after it (what a
  // tuple, container, Call or Global keeps there: see Value).
  Value* new_value(Kind kind, std::size_t behind = 0);
  Value* make_shared_small_int(std::int64_t value);
  [[nodiscard]] static bool is_shared_small_int(const Value& value) noexcept {
    return value.kind_ == Kind::kInt && (value.flags_ & Value::kSharedConstant) != 0;
  }
  // A tuple of one or two shared small ints, shared in turn: 100 000 small tensors have 200 000
  // sizes and strides, most of them (4,) and (1,).
  Value* shared_small_int_tuple(std::span<Value* const> elements);
  Value* make_new_tuple(std::span<Value* const> elements);
  static void raise_depth(Value& target, const Value* child) noexcept;
  detail::Body& body_of(Value& target);
  detail::Body& call_body(Value& call);
  detail::Extra& extra_of(Value& target);
  // Room for `extra` more elements; grow() moves them to a larger block.
  template <typename T>
  void grow_push(detail::GrowArray<T>& array, std::size_t extra) {
    if (array.capacity - array.size < extra) grow(array, extra);
  }
  template <typename T>
  void grow(detail::GrowArray<T>& array, std::size_t extra);

  common::BumpArena memory_;
  std::byte* node_cursor_ = nullptr;
  std::byte* node_limit_ = nullptr;
  std::size_t next_chunk_size_ = 0;
  std::size_t value_count_ = 0;
  Value* none_ = nullptr;
  Value* true_ = nullptr;
  Value* false_ = nullptr;
  Value* empty_tuple_ = nullptr;
  // Python shares its small ints; so does the arena, which saves most ints of a checkpoint
  // (sizes, strides, offsets).
  static constexpr int kSmallIntMin = -5;
  static constexpr int kSmallIntMax = 256;
  Value* small_ints_[kSmallIntMax - kSmallIntMin + 1] = {};
  // The tuples of one shared small int, by the int, and of two, in a small direct-mapped cache
  // (a pair that collides is simply made again: the cache only saves memory).
  Value* small_int_singles_[kSmallIntMax - kSmallIntMin + 1] = {};
  struct SmallIntPair {
    const Value* first = nullptr;
    const Value* second = nullptr;
    Value* tuple = nullptr;
  };
  static constexpr std::size_t kSmallIntPairSlots = 64;
  SmallIntPair small_int_pairs_[kSmallIntPairSlots] = {};
};

inline void* ValueArena::allocate(std::size_t size, std::size_t alignment) {
  return memory_.allocate(size, alignment);
}

// The makers a pickle calls per opcode are defined here, so that the machine's loop inlines them.

inline void* ValueArena::allocate_node(std::size_t size) {
  PTHLOAD_ASSERT(size % alignof(Value) == 0);
  if (size > static_cast<std::size_t>(node_limit_ - node_cursor_)) return allocate_node_slow(size);
  void* node = node_cursor_;
  node_cursor_ += size;
  return node;
}

inline Value* ValueArena::new_value(Kind kind, std::size_t behind) {
  ++value_count_;
  return ::new (allocate_node(sizeof(Value) + behind)) Value(kind);
}

inline Value* ValueArena::make_int(std::int64_t value) {
  if (value >= kSmallIntMin && value <= kSmallIntMax) {
    Value* shared = small_ints_[value - kSmallIntMin];
    return shared != nullptr ? shared : make_shared_small_int(value);
  }
  Value* v = new_value(Kind::kInt);
  v->integer_ = value;
  return v;
}

inline Value* ValueArena::make_string_view(std::string_view text, bool has_surrogates) {
  Value* v = new_value(Kind::kString);
  v->text_ = {text.data(), text.size()};
  if (has_surrogates) v->flags_ |= Value::kHasSurrogates;
  return v;
}

inline Value* ValueArena::make_tuple(std::span<Value* const> elements) {
  if (elements.empty()) return empty_tuple_;
  // A small tensor's size and stride: (4,), (1,), (3, 3)...
  if (elements.size() <= 2 && is_shared_small_int(*elements.front()) &&
      is_shared_small_int(*elements.back())) {
    return shared_small_int_tuple(elements);
  }
  return make_new_tuple(elements);
}

inline Value* ValueArena::make_new_tuple(std::span<Value* const> elements) {
  // The elements right behind the tuple, in one allocation: the same bytes as two, one step.
  // The count is of stack slots that exist, so the size cannot overflow.
  Value* v = new_value(Kind::kTuple, elements.size() * sizeof(const Value*));
  auto** data = reinterpret_cast<const Value**>(v + 1);
  // Python hashes a tuple by hashing its elements, so a tuple is unhashable exactly when one
  // element is; tuples are immutable, so the answer fixed at construction stays right.
  std::uint8_t unhashable = 0;
  std::uint32_t depth = 0;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    const Value* element = elements[i];
    data[i] = element;
    unhashable |= element->flags_;
    depth = std::max(depth, element->depth_);
  }
  v->sequence_ = {data, elements.size()};
  v->depth_ = depth + 1;
  v->flags_ = unhashable & Value::kUnhashable;
  return v;
}

inline Value* ValueArena::make_container(Kind kind) {
  PTHLOAD_ASSERT(kind == Kind::kList || kind == Kind::kDict || kind == Kind::kSet);
  // The body right behind the value, in one allocation.
  static_assert(sizeof(Value) % alignof(detail::Body) == 0);
  Value* v = new_value(kind, sizeof(detail::Body));
  v->container_ = ::new (v + 1) detail::Body{};
  v->depth_ = 1;
  v->flags_ |= Value::kUnhashable;
  return v;
}

inline Value* ValueArena::make_call(std::uint8_t opcode, Value* callable, Value* args,
                                    Value* kwargs) {
  PTHLOAD_ASSERT(args != nullptr && args->kind() == Kind::kTuple);
  static_assert(sizeof(Value) % alignof(detail::Body*) == 0);
  Value* v = new_value(Kind::kCall, sizeof(detail::Body*));
  ::new (v + 1) detail::Body*(nullptr);
  v->opcode_ = opcode;
  v->call_ = {callable, args};
  std::uint32_t depth = std::max(callable->depth_, args->depth_);
  if (kwargs != nullptr) {
    extra_of(*v).kwargs = kwargs;
    depth = std::max(depth, kwargs->depth_);
  }
  v->depth_ = depth + 1;
  return v;
}

inline void ValueArena::raise_depth(Value& target, const Value* child) noexcept {
  // A self-reference (a list appended to itself) must not count its own depth again.
  if (child != &target) target.depth_ = std::max(target.depth_, child->depth_ + 1);
}

inline detail::Body& ValueArena::body_of(Value& target) {
  if (target.kind_ == Kind::kCall) return call_body(target);
  PTHLOAD_ASSERT(target.kind_ == Kind::kList || target.kind_ == Kind::kDict ||
                 target.kind_ == Kind::kSet);
  return *target.container_;
}

inline void ValueArena::set_item(Value& target, const Value* key, const Value* value) {
  auto& entries = body_of(target).entries;
  grow_push(entries, 1);
  entries.data[entries.size++] = DictItem{key, value};
  raise_depth(target, key);
  raise_depth(target, value);
}

inline Value* ValueArena::make_persistent(Value* id) {
  Value* v = new_value(Kind::kPersistent);
  v->persistent_id_ = id;
  v->depth_ = id->depth_ + 1;
  return v;
}

}  // namespace pthload::pickle
