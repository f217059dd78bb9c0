// torch's weights-only unpickler, opcode by opcode (torch/_weights_only_unpickler.py
// Unpickler.load, torch 2.15.0): the same opcodes, the same allow list (scan_tables.inc), the same
// checks on NEWOBJ, REDUCE, BUILD, SETITEM(S), APPEND(S) and BINPERSID, and the same MARK
// semantics (a MARK starts a new stack, so nothing below it is reachable until it is popped).
// A value is kept as what the checks need of it, not made.
#include "audit/weights_only.hpp"

#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "audit/global_rules.hpp"
#include "common/byte_reader.hpp"
#include "pickle/opcodes.hpp"
#include "pickle/text.hpp"

namespace pthload::audit {
namespace {

using pickle::Opcode;

enum class Type : unsigned char {
  kNone,
  kBool,
  kInt,
  kFloat,
  kStr,
  kBytes,
  kTuple,
  kList,
  kDict,
  kSet,
  kGlobal,    ///< an allowed global itself (a class, function or constant)
  kInstance,  ///< what a call made: an instance of `global` (nullptr: of a type not allowed)
  kStorage,   ///< what persistent_load returned: a TypedStorage
};

// What the checks need to know of a value: 24 bytes, since torch's pickles memoise nearly every
// value (a million memo entries for 100 000 tensors).
struct Value {
  Type type = Type::kNone;
  std::uint8_t flags = 0;
  std::uint16_t global = 0;  // kGlobal, kInstance: 1 + its index in weights_only_table();
                             // kTuple: its second item's, when that is a global
  std::uint32_t size = 0;    // kTuple: its length; kInt from LONG1: its byte count
  std::int64_t number = 0;   // kInt: the value when kIntFits; from LONG1: where its bytes start

  static constexpr std::uint8_t kStorageText = 1;     // kStr: the text "storage"
  static constexpr std::uint8_t kFirstIsStorage = 2;  // kTuple: its first item is that text
  static constexpr std::uint8_t kIntFits = 4;         // kInt: `number` is its value
  static constexpr std::uint8_t kFromLong1 = 8;       // kInt: LONG1's bytes at `number`

  [[nodiscard]] bool has(std::uint8_t flag) const { return (flags & flag) != 0; }
  [[nodiscard]] const AllowedGlobal* allowed() const {
    return global == 0 ? nullptr : &weights_only_table()[global - 1];
  }
};
static_assert(sizeof(Value) <= 24);

std::uint16_t index_of(const AllowedGlobal* global) {
  return global == nullptr ? 0
                           : static_cast<std::uint16_t>(global - weights_only_table().data() + 1);
}

Value instance_of(const AllowedGlobal* global) {
  return {.type = Type::kInstance, .global = index_of(global)};
}

bool is(const AllowedGlobal* global, std::string_view module, std::string_view name) {
  return global != nullptr && global->module == module && global->name == name;
}

bool is_tensor_class(const AllowedGlobal* global) {
  return global->name.ends_with("Tensor");
}

class Refused {
 public:
  std::string reason;
};

class Unpickler {
 public:
  Unpickler(std::span<const std::byte> input, PersistentIds persistent_ids)
      : input_(input), persistent_ids_(persistent_ids) {}

  WeightsOnlyCheck run() {
    WeightsOnlyCheck check;
    try {
      const Value root = load();
      check.accepted = true;
      check.end = pos_;
      if (root.type == Type::kInt && root.has(Value::kIntFits)) check.root_int = root.number;
      if (root.has(Value::kFromLong1)) {
        check.root_long_bytes =
            std::string(text_of(input_.subspan(static_cast<std::size_t>(root.number), root.size)));
      }
    } catch (const Refused& refused) {
      check.reason = refused.reason;
      check.offset = op_;
    }
    return check;
  }

 private:
  [[noreturn]] static void refuse(std::string reason) { throw Refused{std::move(reason)}; }

  std::span<const std::byte> read(std::size_t count) {
    if (count > input_.size() - pos_) refuse("pickle data was truncated");
    const auto bytes = input_.subspan(pos_, count);
    pos_ += count;
    return bytes;
  }
  std::uint64_t read_le(std::size_t width) {
    const auto bytes = read(width);
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < width; ++i)
      value |= std::to_integer<std::uint64_t>(bytes[i]) << (8 * i);
    return value;
  }
  // file.readline()[:-1]: through the newline or to the end, the last byte dropped either way.
  std::string_view readline_chopped() {
    const auto rest = input_.subspan(pos_);
    std::size_t length = rest.size();
    for (std::size_t i = 0; i < rest.size(); ++i)
      if (rest[i] == std::byte{'\n'}) {
        length = i + 1;
        break;
      }
    pos_ += length;
    const auto* text = reinterpret_cast<const char*>(rest.data());
    return {text, length == 0 ? 0 : length - 1};
  }
  static std::string_view text_of(std::span<const std::byte> bytes) {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }

  // The current stack: what lies above the newest MARK.
  std::size_t frame_size() const { return stack_.size() - fence_; }
  Value pop() {
    if (frame_size() == 0) refuse("pop from empty list");
    Value value = stack_.back();
    stack_.pop_back();
    return value;
  }
  Value& top() {
    if (frame_size() == 0) refuse("list index out of range");
    return stack_.back();
  }
  // pop_mark(): the items above the newest MARK, which the MARK's stack then replaces.
  std::vector<Value> pop_mark() {
    if (marks_.empty()) refuse("pop from empty list");
    std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(fence_), stack_.end());
    stack_.resize(fence_);
    fence_ = marks_.back();
    marks_.pop_back();
    return items;
  }

  static Value string_value(std::string_view text) {
    return {.type = Type::kStr, .flags = text == "storage" ? Value::kStorageText : std::uint8_t{0}};
  }
  static Value int_value(std::int64_t number) {
    return {.type = Type::kInt, .flags = Value::kIntFits, .number = number};
  }

  static Value tuple_of(const std::vector<Value>& items) {
    Value tuple{.type = Type::kTuple, .size = static_cast<std::uint32_t>(items.size())};
    if (!items.empty() && items[0].has(Value::kStorageText)) tuple.flags |= Value::kFirstIsStorage;
    if (items.size() > 1 && items[1].type == Type::kGlobal) tuple.global = items[1].global;
    return tuple;
  }

  void load_global() {
    const auto module = readline_chopped();
    const auto name = readline_chopped();
    if (pickle::text::check_utf8(module) != pickle::text::Utf8::kValid ||
        pickle::text::check_utf8(name) != pickle::text::Utf8::kValid) {
      refuse("'utf-8' codec can't decode the GLOBAL's module or name");
    }
    if (!weights_only_allows(module, name)) {
      refuse(fmt::format("Unsupported global: GLOBAL {}.{} was not an allowed global by default",
                         module, name));
    }
    stack_.push_back({.type = Type::kGlobal, .global = index_of(weights_only_entry(module, name))});
  }

  // What calling `callable` with `args` returns, as far as the later checks care.
  static Value result_of_call(const AllowedGlobal* callable, const Value& args) {
    if (callable->kind == AllowedKind::kClass) {
      if (is(callable, "builtins", "set")) return {.type = Type::kSet};
      // torch.FloatTensor(...) and the other legacy constructors make a torch.Tensor.
      if (is_tensor_class(callable)) return instance_of(weights_only_entry("torch", "Tensor"));
      return instance_of(callable);
    }
    if (is(callable, "_codecs", "encode")) return {.type = Type::kBytes};
    if (is(callable, "torch.serialization", "_get_layout")) return {.type = Type::kInstance};
    if (callable->name == "_rebuild_parameter" || callable->name == "_rebuild_parameter_with_state")
      return instance_of(weights_only_entry("torch.nn.parameter", "Parameter"));
    // _rebuild_from_type_v2(func, new_type, args, state) returns an instance of new_type.
    if (is(callable, "torch._tensor", "_rebuild_from_type_v2") && args.allowed() != nullptr &&
        args.allowed()->kind == AllowedKind::kClass) {
      return instance_of(args.allowed());
    }
    return instance_of(weights_only_entry("torch", "Tensor"));
  }

  void load_reduce() {
    const Value args = pop();
    Value& callable = top();
    if (callable.type != Type::kGlobal) {
      refuse("Trying to call reduce for unrecognized function");
    }
    const AllowedGlobal* function = callable.allowed();
    if (function->kind == AllowedKind::kConstant) {
      refuse(fmt::format("'{}.{}' is not callable", function->module, function->name));
    }
    if (args.type != Type::kTuple && args.type != Type::kList && args.type != Type::kStr &&
        args.type != Type::kDict && args.type != Type::kSet && args.type != Type::kBytes) {
      refuse("the arguments of a REDUCE must be iterable");
    }
    callable = result_of_call(function, args);
  }

  void load_newobj() {
    const Value args = pop();
    const Value cls = pop();
    if (cls.type != Type::kGlobal || cls.allowed()->kind != AllowedKind::kClass) {
      refuse(
          "Can only create new object for nn.Parameter or classes allowlisted via "
          "`add_safe_globals`");
    }
    (void)args;
    stack_.push_back(result_of_call(cls.allowed(), Value{.type = Type::kTuple}));
  }

  void load_build() {
    (void)pop();  // the state
    const Value& target = top();
    const bool allowed_type = (target.type == Type::kInstance && target.global != 0) ||
                              target.type == Type::kSet || target.type == Type::kStorage;
    if (!allowed_type) {
      refuse(
          "Can only build Tensor, Parameter, OrderedDict or types allowlisted via "
          "`add_safe_globals`");
    }
  }

  void check_set_item_target(std::string_view opcode) {
    const Value& target = top();
    const bool mapping =
        target.type == Type::kDict ||
        (target.type == Type::kInstance && (is(target.allowed(), "collections", "OrderedDict") ||
                                            is(target.allowed(), "collections", "Counter")));
    if (!mapping) {
      refuse(fmt::format("Can only {} for dict, collections.OrderedDict, collections.Counter",
                         opcode));
    }
  }
  static void check_hashable(const Value& key) {
    if (key.type == Type::kList || key.type == Type::kDict || key.type == Type::kSet) {
      refuse("unhashable type used as a dict key");
    }
  }

  void load_persistent() {
    const Value id = pop();
    if (id.type != Type::kTuple && id.type != Type::kInt) {
      refuse("persistent_load id must be tuple or int");
    }
    if (id.type == Type::kTuple && id.size > 0 && !id.has(Value::kFirstIsStorage)) {
      refuse("Only persistent_load of storage is allowed");
    }
    // torch.load's own persistent_load then unpacks the tuple (serialization.py _load,
    // _legacy_load); the default one (a bare pickle) refuses every id.
    if (persistent_ids_ == PersistentIds::kNone) refuse("unsupported persistent id encountered");
    if (id.type != Type::kTuple) refuse("torch.load's persistent_load takes a tuple, not an int");
    const std::uint32_t expected = persistent_ids_ == PersistentIds::kZip ? 5 : 6;
    if (id.size != expected) {
      refuse(fmt::format("a persistent id of {} items where torch.load unpacks {}", id.size,
                         expected));
    }
    const AllowedGlobal* storage_type = id.allowed();
    const bool is_storage_type =
        storage_type != nullptr &&
        (is(storage_type, "torch.storage", "UntypedStorage") ||
         (storage_type->kind == AllowedKind::kConstant && storage_type->name.ends_with("Storage")));
    if (!is_storage_type) refuse("the persistent id names no storage type");
    stack_.push_back({.type = Type::kStorage});
  }

  // torch numbers its memo entries 0, 1, 2...: those live in a vector, kept no larger than
  // twice the entries put (a file cannot make it large by putting one high key).
  void memo_put(std::uint64_t index) {
    const Value& value = top();
    ++memo_puts_;
    if (index < dense_memo_.size()) {
      dense_memo_[index] = value;
      dense_set_[index] = true;
    } else if (index < 2 * memo_puts_ + 1024) {
      dense_memo_.resize(index + 1);
      dense_set_.resize(index + 1);
      dense_memo_[index] = value;
      dense_set_[index] = true;
    } else {
      sparse_memo_[index] = value;
    }
  }
  void memo_get(std::uint64_t index) {
    if (index < dense_memo_.size() && dense_set_[index]) {
      stack_.push_back(dense_memo_[index]);
      return;
    }
    const auto it = sparse_memo_.find(index);
    if (it == sparse_memo_.end()) refuse(fmt::format("KeyError: memo key {} was never put", index));
    stack_.push_back(it->second);
  }

  Value load() {
    for (;;) {
      op_ = pos_;
      if (pos_ >= input_.size()) refuse("EOFError (no STOP)");
      const auto opcode = std::to_integer<std::uint8_t>(input_[pos_++]);
      switch (static_cast<Opcode>(opcode)) {
        case Opcode::kGlobal:
          load_global();
          break;
        case Opcode::kNewObj:
          load_newobj();
          break;
        case Opcode::kReduce:
          load_reduce();
          break;
        case Opcode::kBuild:
          load_build();
          break;
        case Opcode::kAppend: {
          (void)pop();
          if (top().type != Type::kList) refuse("Can only append to lists");
          break;
        }
        case Opcode::kAppends: {
          (void)pop_mark();
          if (top().type != Type::kList) refuse("Can only extend lists");
          break;
        }
        case Opcode::kSetItem: {
          (void)pop();
          const Value key = pop();
          check_set_item_target("SETITEM");
          check_hashable(key);
          break;
        }
        case Opcode::kSetItems: {
          const auto items = pop_mark();
          check_set_item_target("SETITEMS");
          if (items.size() % 2 != 0) refuse("list index out of range (SETITEMS of odd length)");
          for (std::size_t i = 0; i < items.size(); i += 2)
            check_hashable(items[i]);
          break;
        }
        case Opcode::kMark:
          marks_.push_back(fence_);
          fence_ = stack_.size();
          break;
        case Opcode::kTuple:
          stack_.push_back(tuple_of(pop_mark()));
          break;
        case Opcode::kTuple1:
        case Opcode::kTuple2:
        case Opcode::kTuple3: {
          const std::size_t count = opcode - static_cast<std::uint8_t>(Opcode::kTuple1) + 1;
          if (frame_size() < count) refuse("list index out of range");
          std::vector<Value> items(stack_.end() - static_cast<std::ptrdiff_t>(count), stack_.end());
          stack_.resize(stack_.size() - count);
          stack_.push_back(tuple_of(items));
          break;
        }
        case Opcode::kNone:
          stack_.push_back({.type = Type::kNone});
          break;
        case Opcode::kNewFalse:
        case Opcode::kNewTrue:
          stack_.push_back({.type = Type::kBool});
          break;
        case Opcode::kEmptyTuple:
          stack_.push_back({.type = Type::kTuple});
          break;
        case Opcode::kEmptyList:
          stack_.push_back({.type = Type::kList});
          break;
        case Opcode::kEmptyDict:
          stack_.push_back({.type = Type::kDict});
          break;
        case Opcode::kEmptySet:
          stack_.push_back({.type = Type::kSet});
          break;
        case Opcode::kBinInt:
          stack_.push_back(int_value(static_cast<std::int32_t>(read_le(4))));
          break;
        case Opcode::kBinInt1:
          stack_.push_back(int_value(static_cast<std::int64_t>(read_le(1))));
          break;
        case Opcode::kBinInt2:
          stack_.push_back(int_value(static_cast<std::int64_t>(read_le(2))));
          break;
        case Opcode::kBinFloat:
          (void)read(8);
          stack_.push_back({.type = Type::kFloat});
          break;
        case Opcode::kBinUnicode: {
          const auto text = text_of(read(read_le(4)));
          if (pickle::text::check_utf8(text) == pickle::text::Utf8::kInvalid) {
            refuse("'utf-8' codec can't decode a BINUNICODE");
          }
          stack_.push_back(string_value(text));
          break;
        }
        case Opcode::kShortBinString: {
          // Decoded with torch.load's encoding, 'utf-8', strictly.
          const auto text = text_of(read(read_le(1)));
          if (pickle::text::check_utf8(text) != pickle::text::Utf8::kValid) {
            refuse("'utf-8' codec can't decode a SHORT_BINSTRING");
          }
          stack_.push_back(string_value(text));
          break;
        }
        case Opcode::kBinPersId:
          load_persistent();
          break;
        case Opcode::kBinGet:
          memo_get(read_le(1));
          break;
        case Opcode::kLongBinGet:
          memo_get(read_le(4));
          break;
        case Opcode::kBinPut:
          memo_put(read_le(1));
          break;
        case Opcode::kLongBinPut:
          memo_put(read_le(4));
          break;
        case Opcode::kLong1: {
          const std::size_t start = pos_ + 1;
          const auto bytes = read(read_le(1));
          Value value{.type = Type::kInt,
                      .flags = Value::kFromLong1,
                      .size = static_cast<std::uint32_t>(bytes.size()),
                      .number = static_cast<std::int64_t>(start)};
          if (bytes.size() <= 8) {
            std::uint64_t bits = 0;
            for (std::size_t i = 0; i < bytes.size(); ++i)
              bits |= std::to_integer<std::uint64_t>(bytes[i]) << (8 * i);
            // Sign-extend from the top byte written.
            if (!bytes.empty() && bytes.size() < 8 &&
                (std::to_integer<unsigned>(bytes.back()) & 0x80) != 0) {
              bits |= ~std::uint64_t{0} << (8 * bytes.size());
            }
            value = int_value(static_cast<std::int64_t>(bits));
          }
          stack_.push_back(value);
          break;
        }
        case Opcode::kProto:
          // Any version is read on, with a warning when it is not 2.
          (void)read(1);
          break;
        case Opcode::kStop:
          return pop();
        default:
          refuse(fmt::format("Unsupported operand {}", opcode));
      }
    }
  }

  std::span<const std::byte> input_;
  PersistentIds persistent_ids_;
  std::size_t pos_ = 0;
  std::size_t op_ = 0;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;
  std::size_t fence_ = 0;
  std::uint64_t memo_puts_ = 0;
  std::vector<Value> dense_memo_;
  std::vector<bool> dense_set_;
  std::unordered_map<std::uint64_t, Value> sparse_memo_;
};

}  // namespace

WeightsOnlyCheck check_weights_only(std::span<const std::byte> pickle,
                                    PersistentIds persistent_ids) {
  return Unpickler(pickle, persistent_ids).run();
}

}  // namespace pthload::audit
