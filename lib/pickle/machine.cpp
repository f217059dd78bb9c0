// The pickle machine's interpreter loop: one case per opcode, no recursion, nothing imported or
// called (CPython Modules/_pickle.c load_* functions; Lib/pickletools.py for arguments).
#include "pickle/machine.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "common/assert.hpp"
#include "common/byte_reader.hpp"
#include "common/check.hpp"
#include "pickle/memo_pages.hpp"
#include "pickle/opcodes.hpp"
#include "pickle/text.hpp"
#include "pthload/error.hpp"

namespace pthload::pickle {
namespace {

// About what a torch.save pickle of many small tensors makes per byte of itself (37.7 MB of
// values for a 7.6 MB optimizer state): a size hint only, capped by the arena's largest block.
constexpr std::size_t kValueBytesPerPickleByte = 4;

// STACK_GLOBAL takes any str. Python 3 reads STRING, BINSTRING and SHORT_BINSTRING as str too
// (torch.load passes encoding='utf-8'; pickle's default, 'ASCII', does the same for ASCII), so
// a Python 2 string whose bytes decode is a name like any other: `S'os'` feeds STACK_GLOBAL.
bool is_text_name(const Value& value) {
  return value.kind() == Kind::kString ||
         (value.kind() == Kind::kPython2String &&
          text::check_utf8(value.as_string()) == text::Utf8::kValid);
}

}  // namespace

// The state of one run. Lives in this file only; a class (not a function) so that Machine can
// befriend it and lend it its reusable scratch vectors.
class Interpreter {
 public:
  Interpreter(Machine& machine, std::span<const std::byte> input, const RunOptions& options)
      : limits_(machine.limits_),
        options_(options),
        data_(input.data()),
        input_end_(input.data() + input.size()),
        cursor_(input.data()),
        op_(input.data()),
        stack_buffer_(machine.stack_),
        marks_(machine.marks_),
        sparse_memo_(machine.sparse_memo_),
        max_values_(limits_.max_pickle_values),
        max_nesting_(limits_.max_pickle_nesting),
        max_memo_(limits_.max_pickle_memo) {
    // The values of a large pickle then go to large blocks from their first megabytes; a small
    // one still touches only what it uses. Not the memo's pages: they are freed when the run
    // ends, and the tensors' names, allocated next, reuse their heap memory.
    arena_.expect(input.size() * kValueBytesPerPickleByte);
    base_ = top_ = fence_ = stack_buffer_.data();
    end_ = base_ + stack_buffer_.size();
    marks_.clear();
    sparse_memo_.clear();
  }

  Result run();

 private:
  // ---- errors ----
  [[noreturn]] void fail(Errc code, std::string_view message) const {
    throw FormatError(code, fmt::format("pickle: {}", message), context());
  }
  [[noreturn]] void fail_type(std::string_view message) const {
    fail(Errc::kPickleTypeMismatch, fmt::format("{} in {}", message, name()));
  }
  [[noreturn]] void fail_limit(std::string_view limit, std::size_t value) const {
    fail(Errc::kPickleLimitExceeded,
         fmt::format("limit {} ({}) exceeded in {}", limit, value, name()));
  }
  [[noreturn]] void fail_unsupported(std::string_view why) const {
    throw UnsupportedError(Errc::kPickleUnsupportedOpcode,
                           fmt::format("pickle: {} is not supported: {}", name(), why), context());
  }
  // The switch's default. Out of line, so that the opcode is read again from the input: inline,
  // the compiler kept each opcode's byte in a register for it, one more instruction per opcode.
  [[noreturn, gnu::noinline]] void fail_unknown_opcode() const {
    fail(Errc::kPickleUnknownOpcode, fmt::format("unknown opcode {:#04x}", opcode()));
  }
  // EXT1/2/4 (the argument, the extension code, is read for the message). The width comes from
  // the case rather than from the opcode byte, which the loop would otherwise keep for it.
  [[noreturn]] void fail_extension(std::size_t width) {
    std::uint32_t code = 0;
    const std::byte* p = take(width);
    for (std::size_t i = 0; i < width; ++i)
      code |= std::to_integer<std::uint32_t>(p[i]) << (8 * i);
    fail_unsupported(fmt::format(
        "extension code {} needs the copyreg extension registry of the writing process", code));
  }
  [[noreturn]] void fail_underflow() const {
    fail(Errc::kPickleStackUnderflow, fmt::format("stack underflow in {}", name()));
  }
  [[nodiscard]] ErrorContext context() const {
    return {.offset = options_.base_offset + op_offset(), .opcode = opcode()};
  }
  // The opcode being run: the byte at its offset (every error with an opcode is raised after
  // that byte was read), so the loop has nothing to store for it.
  [[nodiscard]] std::uint8_t opcode() const noexcept {
    PTHLOAD_ASSERT(op_ < input_end_);
    return std::to_integer<std::uint8_t>(*op_);
  }
  [[nodiscard]] std::size_t op_offset() const noexcept {
    return static_cast<std::size_t>(op_ - data_);
  }
  [[nodiscard]] std::size_t pos() const noexcept {
    return static_cast<std::size_t>(cursor_ - data_);
  }
  [[nodiscard]] std::size_t remaining() const noexcept {
    return static_cast<std::size_t>(input_end_ - cursor_);
  }
  [[nodiscard]] std::string_view name() const noexcept { return opcode_name(opcode()); }

  // ---- reading arguments ----
  // The helpers every opcode uses are forced inline: the loop is too large for the compiler's
  // own budget, which otherwise makes some of them calls (take() alone cost 20 instructions
  // per opcode as a call).
  [[gnu::always_inline]] const std::byte* take(std::size_t count) {
    if (count > remaining()) {
      fail(Errc::kPickleTruncated,
           fmt::format("truncated {}: needs {} bytes, {} remain", name(), count, remaining()));
    }
    const std::byte* p = cursor_;
    cursor_ += count;
    return p;
  }
  template <typename T>
  [[gnu::always_inline]] T le() {
    return common::load_le<T>(take(sizeof(T)));
  }
  std::string_view line() {
    PTHLOAD_ASSERT(cursor_ <= input_end_);  // take() and line() never step past the end
    const auto* start = reinterpret_cast<const char*>(cursor_);
    const auto* newline = static_cast<const char*>(std::memchr(start, '\n', remaining()));
    if (newline == nullptr) {
      fail(Errc::kPickleTruncated, fmt::format("truncated {}: no end of line", name()));
    }
    cursor_ += static_cast<std::size_t>(newline - start) + 1;
    return {start, static_cast<std::size_t>(newline - start)};
  }
  [[gnu::always_inline]] std::string_view chars(std::size_t count) {
    return {reinterpret_cast<const char*>(take(count)), count};
  }
  std::size_t length_u64() {
    const auto length = le<std::uint64_t>();
    if (length > remaining()) take(length);  // reports the truncation
    return static_cast<std::size_t>(length);
  }

  // ---- the stack ----
  // The stack's slots are the machine's buffer between base_ and top_; end_ is the buffer's end,
  // which never lies past max_pickle_stack, so that one comparison per push covers both
  // (grow_stack() tells them apart). fence_ is the newest MARK's position (base_ without one):
  // CPython's fence, below which nothing is in reach until that MARK is closed.
  [[nodiscard]] std::size_t stack_size() const noexcept {
    return static_cast<std::size_t>(top_ - base_);
  }
  [[nodiscard]] std::size_t above_fence() const noexcept {
    return static_cast<std::size_t>(top_ - fence_);
  }
  // For values already made: every opcode that makes a value pushes it with push_new(), which
  // fails the run when the value count is over max_pickle_values, so between opcodes the count
  // is within the limit and a push of an existing value (GET, DUP, the singletons and shared
  // ints) has no need to look.
  [[gnu::always_inline]] void push(Value* value) {
    PTHLOAD_ASSERT(arena_.value_count() <= max_values_);
    if (top_ == end_) [[unlikely]]
      grow_stack();
    *top_++ = value;
  }
  // For a value this opcode made (or the persistent_load callback returned): the stack's bound
  // first, then the value count, in that order.
  [[gnu::always_inline]] void push_new(Value* value) {
    if (top_ == end_) [[unlikely]]
      grow_stack();
    if (arena_.value_count() > max_values_) [[unlikely]]
      fail_limit("max_pickle_values", max_values_);
    *top_++ = value;
  }
  void grow_stack();
  [[gnu::always_inline]] Value* pop() {
    if (top_ <= fence_) [[unlikely]]
      fail_underflow();
    return *--top_;
  }
  [[gnu::always_inline]] Value* top() {
    if (top_ <= fence_) [[unlikely]]
      fail_underflow();
    return top_[-1];
  }
  // Drops everything above `position` (a stack size).
  void truncate(std::size_t position) noexcept {
    PTHLOAD_ASSERT(position <= stack_size());
    top_ = base_ + position;
  }
  std::size_t pop_mark() {
    if (marks_.empty()) [[unlikely]]
      fail(Errc::kPickleMarkNotFound, fmt::format("no MARK for {}", name()));
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    fence_ = base_ + (marks_.empty() ? 0 : marks_.back());
    // A mark is a stack position, and pop() never reaches below the newest one.
    PTHLOAD_ASSERT(mark <= stack_size());
    return mark;
  }
  [[nodiscard]] std::span<Value* const> above(std::size_t mark) const noexcept {
    PTHLOAD_ASSERT(mark <= stack_size());
    return {base_ + mark, top_};
  }
  void check_depth(const Value& value) const {
    if (value.depth() > max_nesting_) [[unlikely]]
      fail_limit("max_pickle_nesting", max_nesting_);
  }
  void push_container(Value* value) {
    check_depth(*value);
    push_new(value);
  }

  // ---- the memo ----
  // The common case inline: a key in the dense part whose page exists and, for a new entry,
  // room under max_pickle_memo. Anything else takes the *_slow path, which checks it all again.
  [[gnu::always_inline]] void memo_put(std::uint64_t key) {
    Value* value = top();
    if (key < memo_.size()) {
      if (Value** slot = memo_.allocated_slot(static_cast<std::size_t>(key))) {
        // Picklers number entries in order, so a key is nearly always new.
        if (*slot == nullptr) [[likely]] {
          if (memo_count_ < max_memo_) {
            ++memo_count_;
            *slot = value;
            return;
          }
        } else {
          *slot = value;
          return;
        }
      }
    }
    memo_put_slow(key, value);
  }
  [[gnu::always_inline]] void memo_get(std::uint64_t key) {
    if (key < memo_.size()) {
      if (Value* value = memo_.get(static_cast<std::size_t>(key))) {
        push(value);
        return;
      }
    }
    memo_get_slow(key);
  }
  void memo_put_slow(std::uint64_t key, Value* value);
  void memo_get_slow(std::uint64_t key);
  std::uint64_t memo_key_from_line();

  // ---- opcode bodies ----
  void load_mark();
  void load_pop();
  void load_int_line();
  void load_long_line();
  void load_float_line();
  void load_string_line();
  void load_unicode_line();
  [[gnu::always_inline]] void load_unicode(std::size_t size);
  void load_bytes(Kind kind, std::size_t size);
  void load_tuple(std::size_t count);
  void load_from_mark(Kind kind);
  void load_dict_from_mark();
  void load_appends(std::size_t mark);
  void load_setitems(std::size_t mark);
  void load_additems();
  void load_global();
  void load_stack_global();
  void load_call(Value* callable, Value* args, Value* kwargs);
  void load_inst();
  void load_obj();
  void load_build();
  void load_persistent(Value* id);
  Result finish();

  void require_callable(const Value& value) const {
    if (value.kind() != Kind::kGlobal && value.kind() != Kind::kCall &&
        value.kind() != Kind::kPersistent) {
      fail_type(fmt::format("cannot call a {}", kind_name(value.kind())));
    }
  }
  void require_tuple(const Value& value, std::string_view what) const {
    if (value.kind() != Kind::kTuple) {
      fail_type(fmt::format("{} must be a tuple, not a {}", what, kind_name(value.kind())));
    }
  }
  void require_key(const Value& key) const {
    if (!key.is_hashable()) {
      fail(Errc::kPickleUnhashableKey,
           fmt::format("unhashable {} used as a key or set element in {}", kind_name(key.kind()),
                       name()));
    }
  }

  const Limits& limits_;
  const RunOptions& options_;
  // The input as pointers rather than offsets: reading an opcode then costs no addition
  // (offsets, for errors and the Result, are taken from data_).
  const std::byte* data_;
  const std::byte* input_end_;
  const std::byte* cursor_;  // the next byte to read
  const std::byte* op_;      // the opcode being run
  int protocol_ = 0;
  std::vector<Value*>& stack_buffer_;
  Value** base_ = nullptr;
  Value** top_ = nullptr;
  Value** end_ = nullptr;
  Value** fence_ = nullptr;
  std::vector<std::size_t>& marks_;
  // The arena and the memo's dense part are the run's own, not the machine's, so that the loop
  // reaches them without a pointer to follow: finish() moves the arena into the Result, and the
  // memo's pages go with the run (MemoPages kept none from run to run either).
  MemoPages memo_;  // keys below memo_.size()
  std::unordered_map<std::uint64_t, Value*>& sparse_memo_;
  std::size_t memo_count_ = 0;
  ValueArena arena_;
  // The limits read on every push, memo entry and container, held here rather than behind the
  // reference to the Limits.
  std::size_t max_values_;
  std::size_t max_nesting_;
  std::size_t max_memo_;
};

// ---- the memo ----

// Keys are normally 0, 1, 2... (CPython's pickler numbers memo entries in order), so they go to
// a dense vector; but a key is a 32-bit (LONG_BINPUT) or arbitrary (PUT) number, and growing
// the vector to a hostile key would allocate by the key's value. The dense part therefore grows
// only to about twice the number of entries; keys beyond it go to a hash map.
void Interpreter::memo_put_slow(std::uint64_t key, Value* value) {
  if (key < memo_.size()) {
    Value*& slot = memo_.slot(key);
    if (slot == nullptr) {
      if (memo_count_ >= limits_.max_pickle_memo)
        fail_limit("max_pickle_memo", limits_.max_pickle_memo);
      ++memo_count_;
    }
    slot = value;
    return;
  }
  if (const auto it = sparse_memo_.find(key); it != sparse_memo_.end()) {
    it->second = value;
    return;
  }
  if (memo_count_ >= limits_.max_pickle_memo)
    fail_limit("max_pickle_memo", limits_.max_pickle_memo);
  ++memo_count_;
  const std::uint64_t dense_limit = 2 * static_cast<std::uint64_t>(memo_count_) + 1024;
  // The dense part grows by at least doubling, or not at all: each growth walks the sparse keys,
  // and growing a few slots at a time up to the limit (N sparse keys, then N keys each at the
  // dense end) walked them N times — 12 s for a 1 MB pickle.
  const std::uint64_t new_size = std::max<std::uint64_t>(key + 1, memo_.size() * 2);
  if (new_size > dense_limit) {
    sparse_memo_.emplace(key, value);
    return;
  }
  memo_.grow_to(static_cast<std::size_t>(new_size));
  for (auto it = sparse_memo_.begin(); it != sparse_memo_.end();) {
    if (it->first < memo_.size()) {
      memo_.slot(it->first) = it->second;
      it = sparse_memo_.erase(it);
    } else {
      ++it;
    }
  }
  memo_.slot(key) = value;
}

void Interpreter::memo_get_slow(std::uint64_t key) {
  Value* value = nullptr;
  if (key < memo_.size()) {
    value = memo_.get(key);
  } else if (const auto it = sparse_memo_.find(key); it != sparse_memo_.end()) {
    value = it->second;
  }
  if (value == nullptr) {
    fail(Errc::kPickleMemoKeyMissing, fmt::format("memo key {} not found in {}", key, name()));
  }
  push(value);
}

std::uint64_t Interpreter::memo_key_from_line() {
  const auto text = line();
  const auto parsed = text::parse_decimal(text);
  if (!parsed) fail(Errc::kPickleBadArgument, fmt::format("invalid {} argument", name()));
  if (!parsed->big.empty() || parsed->value < 0) {
    fail(Errc::kPickleBadArgument, fmt::format("{} argument out of range", name()));
  }
  return static_cast<std::uint64_t>(parsed->value);
}

// ---- the stack ----

void Interpreter::grow_stack() {
  const std::size_t size = stack_size();
  if (size >= limits_.max_pickle_stack) fail_limit("max_pickle_stack", limits_.max_pickle_stack);
  // Doubling, as a vector's push_back would, but never past the limit: the slots are paid for
  // by the opcodes that fill them.
  const std::size_t fence = static_cast<std::size_t>(fence_ - base_);
  const std::size_t doubled = std::max<std::size_t>(stack_buffer_.size() * 2, 256);
  stack_buffer_.resize(std::max(size + 1, std::min(doubled, limits_.max_pickle_stack)));
  base_ = stack_buffer_.data();
  top_ = base_ + size;
  fence_ = base_ + fence;
  end_ = base_ + stack_buffer_.size();
}

// ---- opcode bodies ----

inline void Interpreter::load_mark() {
  if (marks_.size() >= limits_.max_pickle_stack)
    fail_limit("max_pickle_stack", limits_.max_pickle_stack);
  marks_.push_back(stack_size());
  fence_ = top_;
}

void Interpreter::load_pop() {
  // As in _pickle.c: POP discards the newest MARK when nothing was pushed after it.
  if (!marks_.empty() && marks_.back() == stack_size()) {
    (void)pop_mark();
  } else {
    (void)pop();
  }
}

void Interpreter::load_int_line() {
  const auto text = line();
  // Protocol 0 writes True and False as INT 01 and 00.
  if (text == "00" || text == "01") {
    push(arena_.boolean(text == "01"));
    return;
  }
  // Only what picklers write: decimal without leading zeros. _pickle.c would also take C
  // strtol's forms (0x.., 010 as octal, spaces); pickle.py would not take octal; we take neither.
  const std::string_view digits = text.substr(!text.empty() && (text[0] == '-' || text[0] == '+'));
  const auto parsed = text::parse_decimal(text);
  if (!parsed || (digits.size() > 1 && digits[0] == '0')) {
    fail(Errc::kPickleBadArgument, "invalid INT literal");
  }
  push_new(parsed->big.empty() ? arena_.make_int(parsed->value)
                               : arena_.make_int_from_bytes(parsed->big));
}

void Interpreter::load_long_line() {
  auto text = line();
  if (!text.empty() && text.back() == 'L') text.remove_suffix(1);  // Python 2's repr suffix
  const auto parsed = text::parse_decimal(text);
  if (!parsed) fail(Errc::kPickleBadArgument, "invalid LONG literal");
  push_new(parsed->big.empty() ? arena_.make_int(parsed->value)
                               : arena_.make_int_from_bytes(parsed->big));
}

void Interpreter::load_float_line() {
  const auto value = text::parse_float(line());
  if (!value) fail(Errc::kPickleBadArgument, "invalid FLOAT literal");
  push_new(arena_.make_float(*value));
}

void Interpreter::load_string_line() {
  const auto text = line();
  if (text.size() < 2 || text.front() != text.back() ||
      (text.front() != '\'' && text.front() != '"')) {
    fail(Errc::kPickleBadArgument, "the STRING argument must be quoted");
  }
  const auto body = text.substr(1, text.size() - 2);
  if (body.find('\\') == std::string_view::npos) {
    push_new(arena_.make_bytes_view(Kind::kPython2String, std::as_bytes(std::span{body})));
    return;
  }
  const auto decoded = text::unescape_string(body);
  if (!decoded) fail(Errc::kPickleBadArgument, "invalid escape in STRING");
  push_new(arena_.make_bytes(Kind::kPython2String, std::as_bytes(std::span{*decoded})));
}

void Interpreter::load_unicode_line() {
  const auto text = line();
  if (text.find('\\') == std::string_view::npos && text::is_ascii(text)) {
    push_new(arena_.make_string_view(text));
    return;
  }
  bool has_surrogates = false;
  const auto decoded = text::decode_raw_unicode_escape(text, has_surrogates);
  if (!decoded) fail(Errc::kPickleBadArgument, "invalid raw-unicode-escape in UNICODE");
  push_new(arena_.make_string(*decoded, has_surrogates));
}

inline void Interpreter::load_unicode(std::size_t size) {
  const auto text = chars(size);
  // CPython decodes with 'surrogatepass', so encoded lone surrogates are accepted (and kept).
  const auto check = text::is_ascii(text) ? text::Utf8::kValid : text::check_utf8(text);
  if (check == text::Utf8::kInvalid) {
    fail(Errc::kPickleInvalidUtf8, fmt::format("invalid UTF-8 in {}", name()));
  }
  push_new(arena_.make_string_view(text, check == text::Utf8::kValidWithSurrogates));
}

void Interpreter::load_bytes(Kind kind, std::size_t size) {
  push_new(arena_.make_bytes_view(kind, {take(size), size}));
}

inline void Interpreter::load_tuple(std::size_t count) {
  if (above_fence() < count) fail_underflow();
  const std::size_t first = stack_size() - count;
  Value* tuple = arena_.make_tuple(above(first));
  truncate(first);
  push_container(tuple);
}

inline void Interpreter::load_from_mark(Kind kind) {
  const std::size_t mark = pop_mark();
  const auto items = above(mark);
  Value* value = nullptr;
  if (kind == Kind::kTuple) {
    value = arena_.make_tuple(items);
  } else if (kind == Kind::kFrozenSet) {
    for (const Value* item : items)
      require_key(*item);
    value = arena_.make_frozenset(items);
  } else {
    value = arena_.make_container(Kind::kList);
    arena_.append_many(*value, items);
  }
  truncate(mark);
  push_container(value);
}

void Interpreter::load_dict_from_mark() {
  const std::size_t mark = pop_mark();
  const auto items = above(mark);
  if (items.size() % 2 != 0) fail(Errc::kPickleBadArgument, "odd number of items for DICT");
  Value* dict = arena_.make_container(Kind::kDict);
  for (std::size_t i = 0; i < items.size(); i += 2) {
    require_key(*items[i]);
    arena_.set_item(*dict, items[i], items[i + 1]);
  }
  truncate(mark);
  push_container(dict);
}

void Interpreter::load_appends(std::size_t mark) {
  // The target sits just below the items (and, for APPENDS, below the MARK just popped).
  if (base_ + mark <= fence_) fail_underflow();
  Value& target = *base_[mark - 1];
  if (target.kind() != Kind::kList && target.kind() != Kind::kCall) {
    fail_type(fmt::format("cannot append to a {}", kind_name(target.kind())));
  }
  arena_.append_many(target, above(mark));
  truncate(mark);
  check_depth(target);
}

inline void Interpreter::load_setitems(std::size_t mark) {
  if (base_ + mark <= fence_) fail_underflow();
  Value& target = *base_[mark - 1];
  const auto items = above(mark);
  if (target.kind() != Kind::kDict && target.kind() != Kind::kCall) {
    fail_type(fmt::format("cannot set items on a {}", kind_name(target.kind())));
  }
  if (items.size() % 2 != 0) {
    fail(Errc::kPickleBadArgument, fmt::format("odd number of items for {}", name()));
  }
  arena_.reserve_entries(target, items.size() / 2);
  for (std::size_t i = 0; i < items.size(); i += 2) {
    // A Call may be any mapping class, whose keys Python does not necessarily hash.
    if (target.kind() == Kind::kDict) require_key(*items[i]);
    arena_.set_item(target, items[i], items[i + 1]);
  }
  truncate(mark);
  check_depth(target);
}

void Interpreter::load_additems() {
  const std::size_t mark = pop_mark();
  if (base_ + mark <= fence_) fail_underflow();
  Value& target = *base_[mark - 1];
  if (target.kind() != Kind::kSet && target.kind() != Kind::kCall) {
    fail_type(fmt::format("cannot add items to a {}", kind_name(target.kind())));
  }
  for (Value* item : above(mark)) {
    if (target.kind() == Kind::kSet) require_key(*item);
    arena_.add_item(target, item);
  }
  truncate(mark);
  check_depth(target);
}

void Interpreter::load_global() {
  const auto module = line();
  const auto qualified_name = line();
  // _pickle.c decodes both lines as strict UTF-8 (INST: ASCII, checked by the caller).
  if (text::check_utf8(module) != text::Utf8::kValid ||
      text::check_utf8(qualified_name) != text::Utf8::kValid) {
    fail(Errc::kPickleInvalidUtf8, fmt::format("invalid UTF-8 in {} name", name()));
  }
  if (module.size() > UINT32_MAX || qualified_name.size() > UINT32_MAX) {
    fail(Errc::kPickleBadArgument, fmt::format("{} name too long", name()));
  }
  push_new(arena_.make_global_view(module, qualified_name));
  if (options_.on_global_or_call) options_.on_global_or_call(*top());
}

void Interpreter::load_stack_global() {
  Value* qualified_name = pop();
  Value* module = pop();
  if (!is_text_name(*module) || !is_text_name(*qualified_name)) {
    fail_type(fmt::format("module and name must be str, not {} and {}", kind_name(module->kind()),
                          kind_name(qualified_name->kind())));
  }
  if (module->as_string().size() > UINT32_MAX || qualified_name->as_string().size() > UINT32_MAX) {
    fail(Errc::kPickleBadArgument, "STACK_GLOBAL name too long");
  }
  push_new(arena_.make_global_view(module->as_string(), qualified_name->as_string()));
  if (options_.on_global_or_call) options_.on_global_or_call(*top());
}

inline void Interpreter::load_call(Value* callable, Value* args, Value* kwargs) {
  require_callable(*callable);
  require_tuple(*args, "the arguments");
  if (kwargs != nullptr && kwargs->kind() != Kind::kDict && kwargs->kind() != Kind::kCall) {
    fail_type(
        fmt::format("the keyword arguments must be a dict, not a {}", kind_name(kwargs->kind())));
  }
  push_container(arena_.make_call(opcode(), callable, args, kwargs));
  if (options_.on_global_or_call) options_.on_global_or_call(*top());
}

void Interpreter::load_inst() {
  const std::size_t mark = pop_mark();
  const auto module = line();
  const auto qualified_name = line();
  // _pickle.c decodes INST's module and name as ASCII.
  if (!text::is_ascii(module) || !text::is_ascii(qualified_name)) {
    fail(Errc::kPickleInvalidUtf8, "INST module and name must be ASCII");
  }
  if (module.size() > UINT32_MAX || qualified_name.size() > UINT32_MAX) {
    fail(Errc::kPickleBadArgument, "INST name too long");
  }
  Value* args = arena_.make_tuple(above(mark));
  truncate(mark);
  check_depth(*args);
  Value* cls = arena_.make_global_view(module, qualified_name);
  if (options_.on_global_or_call) options_.on_global_or_call(*cls);
  load_call(cls, args, nullptr);
}

void Interpreter::load_obj() {
  const std::size_t mark = pop_mark();
  if (stack_size() - mark < 1) fail_underflow();
  Value* cls = base_[mark];
  Value* args = arena_.make_tuple(above(mark + 1));
  truncate(mark);
  check_depth(*args);
  load_call(cls, args, nullptr);
}

void Interpreter::load_build() {
  Value* state = pop();
  Value& target = *top();
  if (options_.on_build) options_.on_build(target, *state);
  switch (target.kind()) {
    case Kind::kList:
    case Kind::kDict:
    case Kind::kSet:
    case Kind::kCall:
      arena_.add_state(target, state);
      check_depth(target);
      return;
    default:
      // Python only needs __dict__ for a state that is not false; None is what such objects'
      // __reduce_ex__ gives, so it is accepted (and dropped) everywhere.
      if (state->kind() == Kind::kNone) return;
      fail_type(fmt::format("cannot set the state of a {}", kind_name(target.kind())));
  }
}

inline void Interpreter::load_persistent(Value* id) {
  const Value* value = nullptr;
  if (options_.persistent_load) {
    // The torch layer's errors about the id are located at this opcode.
    value = common::with_context({.offset = options_.base_offset + op_offset(), .opcode = opcode()},
                                 [&] { return options_.persistent_load(*id, arena_); });
  }
  // Values only come into being in an arena, non-const: handing one back as const and taking
  // it again as mutable (a later APPEND may extend it) is sound.
  Value* pushed = value != nullptr ? const_cast<Value*>(value) : arena_.make_persistent(id);
  push_container(pushed);
}

Result Interpreter::finish() {
  if (!marks_.empty()) fail(Errc::kPickleBadStop, "STOP with an open MARK");
  if (stack_size() != 1) {
    fail(Errc::kPickleBadStop,
         fmt::format("STOP with {} values on the stack (expected one)", stack_size()));
  }
  if (!options_.allow_trailing_bytes && cursor_ != input_end_) {
    throw FormatError(Errc::kPickleTrailingBytes,
                      fmt::format("pickle: {} trailing bytes after STOP", remaining()),
                      {.offset = options_.base_offset + pos(), .opcode = opcode()});
  }
  Result result;
  result.root = base_[0];
  result.end_offset = pos();
  result.protocol = protocol_;
  result.arena = std::make_unique<ValueArena>(std::move(arena_));
  return result;
}

Result Interpreter::run() {
  // A local the compiler can keep in a register: the member is read again after every opcode
  // whose body calls out (callbacks, slow paths), which may, for all it knows, change it.
  const std::byte* const input_end = input_end_;
  for (;;) {
    op_ = cursor_;
    if (cursor_ >= input_end) {
      throw FormatError(Errc::kPickleNoStop, "pickle: input ended before STOP",
                        {.offset = options_.base_offset + pos()});
    }
    const auto this_opcode = static_cast<Opcode>(std::to_integer<std::uint8_t>(*cursor_++));
    switch (this_opcode) {
      // ---- framing and control ----
      case Opcode::kProto: {
        const auto version = le<std::uint8_t>();
        if (version > kHighestProtocol) {
          fail(Errc::kPickleBadProtocol, fmt::format("unsupported protocol {}", version));
        }
        protocol_ = version;
        break;
      }
      case Opcode::kFrame:
        // Frames only batch reads; _pickle.c checks that the frame is there and reads on.
        (void)length_u64();
        break;
      case Opcode::kStop:
        return finish();
      case Opcode::kMark:
        load_mark();
        break;
      case Opcode::kPop:
        load_pop();
        break;
      case Opcode::kPopMark:
        truncate(pop_mark());
        break;
      case Opcode::kDup:
        push(top());
        break;

      // ---- the memo ----
      case Opcode::kPut:
        memo_put(memo_key_from_line());
        break;
      case Opcode::kBinPut:
        memo_put(le<std::uint8_t>());
        break;
      case Opcode::kLongBinPut:
        memo_put(le<std::uint32_t>());
        break;
      case Opcode::kMemoize:
        memo_put(memo_count_);
        break;
      case Opcode::kGet:
        memo_get(memo_key_from_line());
        break;
      case Opcode::kBinGet:
        memo_get(le<std::uint8_t>());
        break;
      case Opcode::kLongBinGet:
        memo_get(le<std::uint32_t>());
        break;

      // ---- scalars ----
      case Opcode::kNone:
        push(arena_.none());
        break;
      case Opcode::kNewTrue:
        push(arena_.boolean(true));
        break;
      case Opcode::kNewFalse:
        push(arena_.boolean(false));
        break;
      case Opcode::kInt:
        load_int_line();
        break;
      case Opcode::kBinInt:
        push_new(arena_.make_int(static_cast<std::int32_t>(le<std::uint32_t>())));
        break;
      case Opcode::kBinInt1:
        // 0 to 255: always one of the arena's shared ints, which count as no new value.
        push(arena_.make_int(le<std::uint8_t>()));
        break;
      case Opcode::kBinInt2:
        push_new(arena_.make_int(le<std::uint16_t>()));
        break;
      case Opcode::kLong:
        load_long_line();
        break;
      case Opcode::kLong1: {
        const auto size = le<std::uint8_t>();
        push_new(arena_.make_int_from_bytes({take(size), size}));
        break;
      }
      case Opcode::kLong4: {
        const auto size = static_cast<std::int32_t>(le<std::uint32_t>());
        if (size < 0) fail(Errc::kPickleBadArgument, "negative byte count in LONG4");
        const auto count = static_cast<std::size_t>(size);
        push_new(arena_.make_int_from_bytes({take(count), count}));
        break;
      }
      case Opcode::kFloat:
        load_float_line();
        break;
      case Opcode::kBinFloat:
        // Big-endian, unlike every other number in a pickle.
        push_new(arena_.make_float(std::bit_cast<double>(common::load_be<std::uint64_t>(take(8)))));
        break;

      // ---- strings and bytes ----
      case Opcode::kString:
        load_string_line();
        break;
      case Opcode::kBinString: {
        const auto size = static_cast<std::int32_t>(le<std::uint32_t>());
        if (size < 0) fail(Errc::kPickleBadArgument, "negative byte count in BINSTRING");
        load_bytes(Kind::kPython2String, static_cast<std::size_t>(size));
        break;
      }
      case Opcode::kShortBinString:
        load_bytes(Kind::kPython2String, le<std::uint8_t>());
        break;
      case Opcode::kUnicode:
        load_unicode_line();
        break;
      case Opcode::kBinUnicode:
        load_unicode(le<std::uint32_t>());
        break;
      case Opcode::kShortBinUnicode:
        load_unicode(le<std::uint8_t>());
        break;
      case Opcode::kBinUnicode8:
        load_unicode(length_u64());
        break;
      case Opcode::kBinBytes:
        load_bytes(Kind::kBytes, le<std::uint32_t>());
        break;
      case Opcode::kShortBinBytes:
        load_bytes(Kind::kBytes, le<std::uint8_t>());
        break;
      case Opcode::kBinBytes8:
        load_bytes(Kind::kBytes, length_u64());
        break;
      case Opcode::kByteArray8:
        load_bytes(Kind::kByteArray, length_u64());
        break;

      // ---- containers ----
      case Opcode::kEmptyTuple:
        push(arena_.empty_tuple());
        break;
      case Opcode::kTuple1:
        load_tuple(1);
        break;
      case Opcode::kTuple2:
        load_tuple(2);
        break;
      case Opcode::kTuple3:
        load_tuple(3);
        break;
      case Opcode::kTuple:
        load_from_mark(Kind::kTuple);
        break;
      case Opcode::kEmptyList:
        push_new(arena_.make_container(Kind::kList));
        break;
      case Opcode::kList:
        load_from_mark(Kind::kList);
        break;
      case Opcode::kEmptyDict:
        push_new(arena_.make_container(Kind::kDict));
        break;
      case Opcode::kDict:
        load_dict_from_mark();
        break;
      case Opcode::kEmptySet:
        push_new(arena_.make_container(Kind::kSet));
        break;
      case Opcode::kFrozenSet:
        load_from_mark(Kind::kFrozenSet);
        break;
      case Opcode::kAppend:
        if (above_fence() < 2) fail_underflow();
        load_appends(stack_size() - 1);
        break;
      case Opcode::kAppends:
        load_appends(pop_mark());
        break;
      case Opcode::kSetItem:
        if (above_fence() < 2) fail_underflow();
        load_setitems(stack_size() - 2);
        break;
      case Opcode::kSetItems:
        load_setitems(pop_mark());
        break;
      case Opcode::kAddItems:
        load_additems();
        break;

      // ---- classes, calls, objects ----
      case Opcode::kGlobal:
        load_global();
        break;
      case Opcode::kStackGlobal:
        load_stack_global();
        break;
      case Opcode::kReduce: {
        Value* args = pop();
        Value* callable = pop();
        load_call(callable, args, nullptr);
        break;
      }
      case Opcode::kNewObj: {
        Value* args = pop();
        Value* cls = pop();
        load_call(cls, args, nullptr);
        break;
      }
      case Opcode::kNewObjEx: {
        Value* kwargs = pop();
        Value* args = pop();
        Value* cls = pop();
        load_call(cls, args, kwargs);
        break;
      }
      case Opcode::kInst:
        load_inst();
        break;
      case Opcode::kObj:
        load_obj();
        break;
      case Opcode::kBuild:
        load_build();
        break;
      case Opcode::kPersId: {
        const auto id = line();
        // _pickle.c decodes PERSID's id as ASCII.
        if (!text::is_ascii(id)) fail(Errc::kPickleBadArgument, "PERSID id must be ASCII");
        load_persistent(arena_.make_string_view(id));
        break;
      }
      case Opcode::kBinPersId:
        load_persistent(pop());
        break;

      // ---- valid pickle, but nothing a file can use ----
      case Opcode::kExt1:
        fail_extension(1);
      case Opcode::kExt2:
        fail_extension(2);
      case Opcode::kExt4:
        fail_extension(4);
      case Opcode::kNextBuffer:
        fail_unsupported("out-of-band buffers exist only in the writing process");
      case Opcode::kReadonlyBuffer:
        fail_unsupported("it only follows NEXT_BUFFER, whose out-of-band buffers a file lacks");

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wswitch"  // the two bytes are no Opcode
      // No opcodes either, but given cases of their own, apart from default's: the jump table
      // then spans every byte and needs no range check before the jump (4 of the about 18
      // instructions the loop spends on each opcode). Cases that went where default goes would
      // be folded into it; their messages are default's, spelled out (see fail_unknown_opcode).
      case Opcode{0x00}:
        fail(Errc::kPickleUnknownOpcode, "unknown opcode 0x00");
      case Opcode{0xff}:
        fail(Errc::kPickleUnknownOpcode, "unknown opcode 0xff");
#pragma GCC diagnostic pop
      default:
        fail_unknown_opcode();
    }
  }
}

Machine::Machine(const Limits& limits) : limits_(limits) {}

Result Machine::run(std::span<const std::byte> input, const RunOptions& options) {
  Interpreter interpreter(*this, input, options);
  try {
    return interpreter.run();
  } catch (...) {
    // The interpreter, and with it every value it made, goes only after this handler.
    if (options.on_abandon) options.on_abandon();
    throw;
  }
}

}  // namespace pthload::pickle
