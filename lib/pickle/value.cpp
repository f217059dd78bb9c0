// Value accessors and the block arena that owns the value tree (see value.hpp).
#include "pickle/value.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <new>

#include "pthload/error.hpp"

namespace pthload::pickle {

// Values are 24 bytes (a Call 32 and a Global 48 with what lies behind them); the arena is sized
// by it (a pickle of 100 000 tensors makes nearly a million).
static_assert(sizeof(Value) == 24);

std::string_view kind_name(Kind kind) noexcept {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kBigInt:
      return "bigint";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kPython2String:
      return "python2-string";
    case Kind::kBytes:
      return "bytes";
    case Kind::kByteArray:
      return "bytearray";
    case Kind::kTuple:
      return "tuple";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kSet:
      return "set";
    case Kind::kFrozenSet:
      return "frozenset";
    case Kind::kGlobal:
      return "global";
    case Kind::kCall:
      return "call";
    case Kind::kPersistent:
      return "persistent";
  }
  return "unknown";
}

// ---- Value ----

bool Value::as_bool() const noexcept {
  assert(kind_ == Kind::kBool);
  return boolean_;
}

std::int64_t Value::as_int() const noexcept {
  assert(kind_ == Kind::kInt);
  return integer_;
}

double Value::as_float() const noexcept {
  assert(kind_ == Kind::kFloat);
  return real_;
}

std::string_view Value::as_string() const noexcept {
  assert(kind_ == Kind::kString || kind_ == Kind::kPython2String);
  return {text_.data, text_.size};
}

std::span<const std::byte> Value::as_bytes() const noexcept {
  assert(kind_ == Kind::kBytes || kind_ == Kind::kByteArray || kind_ == Kind::kPython2String ||
         kind_ == Kind::kBigInt);
  return {reinterpret_cast<const std::byte*>(text_.data), text_.size};
}

std::string_view Value::module() const noexcept {
  assert(kind_ == Kind::kGlobal);
  return {global_name().module, global_name().module_size};
}

std::string_view Value::name() const noexcept {
  assert(kind_ == Kind::kGlobal);
  return {global_name().name, global_name().name_size};
}

bool Value::is_global(std::string_view module_name,
                      std::string_view qualified_name) const noexcept {
  return kind_ == Kind::kGlobal && module() == module_name && name() == qualified_name;
}

const detail::Body* Value::body() const noexcept {
  switch (kind_) {
    case Kind::kList:
    case Kind::kDict:
    case Kind::kSet:
      return container_;
    case Kind::kCall:
      return call_body();
    default:
      return nullptr;
  }
}

std::span<const Value* const> Value::items() const noexcept {
  if (kind_ == Kind::kTuple || kind_ == Kind::kFrozenSet) return {sequence_.data, sequence_.size};
  const auto* b = body();
  return b != nullptr ? b->items.span() : std::span<const Value* const>{};
}

std::span<const DictItem> Value::dict_items() const noexcept {
  const auto* b = body();
  return b != nullptr ? b->entries.span() : std::span<const DictItem>{};
}

std::span<const Value* const> Value::added_items() const noexcept {
  const auto* b = body();
  return b != nullptr && b->extra != nullptr ? b->extra->added.span()
                                             : std::span<const Value* const>{};
}

std::span<const Value* const> Value::states() const noexcept {
  const auto* b = body();
  return b != nullptr && b->extra != nullptr ? b->extra->states.span()
                                             : std::span<const Value* const>{};
}

const Value* Value::state() const noexcept {
  const auto all = states();
  return all.empty() ? nullptr : all.back();
}

const Value& Value::callable() const noexcept {
  assert(kind_ == Kind::kCall);
  return *call_.callable;
}

const Value& Value::args() const noexcept {
  assert(kind_ == Kind::kCall);
  return *call_.args;
}

const Value* Value::kwargs() const noexcept {
  assert(kind_ == Kind::kCall);
  const detail::Body* b = call_body();
  return b != nullptr && b->extra != nullptr ? b->extra->kwargs : nullptr;
}

const Value& Value::persistent_id() const noexcept {
  assert(kind_ == Kind::kPersistent);
  return *persistent_id_;
}

// ---- ValueArena ----

ValueArena::ValueArena() {
  none_ = new_value(Kind::kNone);
  true_ = new_value(Kind::kBool);
  true_->boolean_ = true;
  false_ = new_value(Kind::kBool);
  false_->boolean_ = false;
  empty_tuple_ = new_value(Kind::kTuple);
  empty_tuple_->sequence_ = {nullptr, 0};
  empty_tuple_->depth_ = 1;
  value_count_ = 0;
}

ValueArena::ValueArena(ValueArena&&) noexcept = default;
ValueArena& ValueArena::operator=(ValueArena&&) noexcept = default;
ValueArena::~ValueArena() = default;

namespace {

// Node chunks double from 1 KiB (a small pickle's arena stays small) to 64 KiB, small beside the
// arena's 4 MiB blocks, so that a chunk that no longer fits a block wastes little of it.
constexpr std::size_t kFirstChunkSize = 1024;
constexpr std::size_t kMaxChunkSize = 64 * 1024;
static_assert(sizeof(Value) % alignof(Value) == 0 && sizeof(detail::Body) % alignof(Value) == 0);

}  // namespace

void* ValueArena::allocate_node_slow(std::size_t size) {
  const std::size_t chunk = std::max(next_chunk_size_, kFirstChunkSize);
  // A node as large as half a chunk (a tuple of dozens or thousands) gets memory of its own and
  // leaves the chunk in use, so that what a new chunk abandons is less than half of one.
  if (size > chunk / 2) return allocate(size, alignof(Value));
  next_chunk_size_ = std::min(chunk * 2, kMaxChunkSize);
  node_cursor_ = static_cast<std::byte*>(allocate(chunk, alignof(Value)));
  node_limit_ = node_cursor_ + chunk;
  void* node = node_cursor_;
  node_cursor_ += size;
  return node;
}

std::string_view ValueArena::copy(std::string_view text) {
  if (text.empty()) return {};
  auto* data = static_cast<char*>(allocate(text.size(), 1));
  std::memcpy(data, text.data(), text.size());
  return {data, text.size()};
}

Value* ValueArena::make_shared_small_int(std::int64_t value) {
  assert(value >= kSmallIntMin && value <= kSmallIntMax);
  Value*& shared = small_ints_[value - kSmallIntMin];
  shared = new_value(Kind::kInt);
  shared->integer_ = value;
  shared->flags_ = Value::kSharedConstant;
  --value_count_;
  return shared;
}

Value* ValueArena::shared_small_int_tuple(std::span<Value* const> elements) {
  const auto position = [](const Value* value) {
    return static_cast<std::size_t>(value->integer_ - kSmallIntMin);
  };
  Value** slot = nullptr;
  if (elements.size() == 1) {
    slot = &small_int_singles_[position(elements[0])];
  } else {
    SmallIntPair& pair =
        small_int_pairs_[(position(elements[0]) * 31 + position(elements[1])) % kSmallIntPairSlots];
    if (pair.first != elements[0] || pair.second != elements[1]) {
      pair = {elements[0], elements[1], nullptr};
    }
    slot = &pair.tuple;
  }
  if (*slot == nullptr) {
    *slot = make_new_tuple(elements);
    (*slot)->flags_ |= Value::kSharedConstant;
  }
  return *slot;
}

Value* ValueArena::make_int_from_bytes(std::span<const std::byte> bytes) {
  // Drop high bytes that only repeat the sign (Python's int.from_bytes has no size), so that
  // any encoding of an int64 value becomes a kInt.
  std::size_t n = bytes.size();
  while (n > 1) {
    const auto top = std::to_integer<unsigned>(bytes[n - 1]);
    const bool next_negative = (std::to_integer<unsigned>(bytes[n - 2]) & 0x80) != 0;
    if ((top == 0x00 && !next_negative) || (top == 0xFF && next_negative)) {
      --n;
    } else {
      break;
    }
  }
  if (n <= 8) {
    std::uint64_t raw = 0;
    for (std::size_t i = 0; i < n; ++i)
      raw |= std::to_integer<std::uint64_t>(bytes[i]) << (8 * i);
    if (n > 0 && n < 8 && (std::to_integer<unsigned>(bytes[n - 1]) & 0x80) != 0) {
      raw |= ~std::uint64_t{0} << (8 * n);
    }
    return make_int(static_cast<std::int64_t>(raw));
  }
  Value* v = make_bytes(Kind::kBigInt, bytes.first(n));
  return v;
}

Value* ValueArena::make_float(double value) {
  Value* v = new_value(Kind::kFloat);
  v->real_ = value;
  return v;
}

Value* ValueArena::make_string(std::string_view text, bool has_surrogates) {
  return make_string_view(copy(text), has_surrogates);
}

Value* ValueArena::make_bytes(Kind kind, std::span<const std::byte> bytes) {
  const auto text = copy({reinterpret_cast<const char*>(bytes.data()), bytes.size()});
  return make_bytes_view(kind, std::as_bytes(std::span{text.data(), text.size()}));
}

Value* ValueArena::make_bytes_view(Kind kind, std::span<const std::byte> bytes) {
  assert(kind == Kind::kBytes || kind == Kind::kByteArray || kind == Kind::kPython2String ||
         kind == Kind::kBigInt);
  Value* v = new_value(kind);
  v->text_ = {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  if (kind == Kind::kByteArray) v->flags_ |= Value::kUnhashable;
  return v;
}

Value* ValueArena::make_global(std::string_view module, std::string_view name) {
  return make_global_view(copy(module), copy(name));
}

Value* ValueArena::make_global_view(std::string_view module, std::string_view name) {
  assert(module.size() <= UINT32_MAX && name.size() <= UINT32_MAX);
  static_assert(sizeof(Value) % alignof(Value::Name) == 0 && sizeof(Value::Name) % 8 == 0);
  Value* v = new_value(Kind::kGlobal, sizeof(Value::Name));
  ::new (v + 1) Value::Name{module.data(), name.data(), static_cast<std::uint32_t>(module.size()),
                            static_cast<std::uint32_t>(name.size())};
  return v;
}

namespace {

// The bound on a container's elements (GrowArray sizes are 32-bit, and doubling must not wrap).
constexpr std::size_t kMaxElements = UINT32_MAX / 2;

template <typename Span>
std::uint32_t max_child_depth(Span elements) {
  std::uint32_t depth = 0;
  for (const Value* e : elements)
    depth = std::max(depth, e->depth());
  return depth;
}

}  // namespace

Value* ValueArena::make_frozenset(std::span<Value* const> elements) {
  const Value** data = nullptr;
  if (!elements.empty()) {
    data = static_cast<const Value**>(
        allocate(elements.size() * sizeof(const Value*), alignof(const Value*)));
    std::copy(elements.begin(), elements.end(), data);
  }
  Value* v = new_value(Kind::kFrozenSet);
  v->sequence_ = {data, elements.size()};
  v->depth_ = max_child_depth(elements) + 1;
  return v;
}

detail::Body& ValueArena::call_body(Value& call) {
  assert(call.kind_ == Kind::kCall);
  detail::Body*& body = call.call_body_slot();
  if (body == nullptr) {
    body = ::new (allocate(sizeof(detail::Body), alignof(detail::Body))) detail::Body{};
  }
  return *body;
}

detail::Extra& ValueArena::extra_of(Value& target) {
  auto& body = body_of(target);
  if (body.extra == nullptr) {
    body.extra = ::new (allocate(sizeof(detail::Extra), alignof(detail::Extra))) detail::Extra{};
  }
  return *body.extra;
}

template <typename T>
void ValueArena::grow(detail::GrowArray<T>& array, std::size_t extra) {
  assert(array.capacity - array.size < extra);
  // Reaching 2^32 items takes billions of opcodes; refuse rather than wrap.
  if (extra > kMaxElements - array.size) {
    throw FormatError(Errc::kPickleLimitExceeded, "pickle: a container exceeds 2^31 items");
  }
  const std::size_t capacity =
      std::max({array.size + extra, std::size_t{array.capacity} * 2, std::size_t{2}});
  auto* data = static_cast<T*>(allocate(capacity * sizeof(T), alignof(T)));
  if (array.size != 0) std::memcpy(static_cast<void*>(data), array.data, array.size * sizeof(T));
  array.data = data;
  array.capacity = static_cast<std::uint32_t>(capacity);
}

// For grow_push() in the header.
template void ValueArena::grow(detail::GrowArray<const Value*>& array, std::size_t extra);
template void ValueArena::grow(detail::GrowArray<DictItem>& array, std::size_t extra);

void ValueArena::append(Value& target, const Value* item) {
  auto& items = body_of(target).items;
  grow_push(items, 1);
  items.data[items.size++] = item;
  raise_depth(target, item);
}

void ValueArena::append_many(Value& target, std::span<Value* const> items) {
  if (items.empty()) return;
  auto& array = body_of(target).items;
  grow_push(array, items.size());
  std::copy(items.begin(), items.end(), array.data + array.size);
  array.size += static_cast<std::uint32_t>(items.size());
  for (const Value* item : items)
    raise_depth(target, item);
}

void ValueArena::reserve_entries(Value& target, std::size_t count) {
  auto& entries = body_of(target).entries;
  if (count > kMaxElements - entries.size) return;
  grow_push(entries, count);
}

void ValueArena::add_item(Value& target, const Value* item) {
  auto& array = target.kind_ == Kind::kCall ? extra_of(target).added : body_of(target).items;
  grow_push(array, 1);
  array.data[array.size++] = item;
  raise_depth(target, item);
}

void ValueArena::add_state(Value& target, const Value* state) {
  auto& states = extra_of(target).states;
  grow_push(states, 1);
  states.data[states.size++] = state;
  raise_depth(target, state);
}

}  // namespace pthload::pickle
