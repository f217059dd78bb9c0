// The value-tree printer (see print.hpp): two iterative passes, one to find containers reached
// twice, one to write; Python's repr() rules from Objects/unicodeobject.c unicode_repr and
// Objects/bytesobject.c PyBytes_Repr, floats as Python's repr (shortest round trip).
#include "pickle/print.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "pickle/codecs.hpp"
#include "pickle/text.hpp"
#include "pthload/error.hpp"

namespace pthload::pickle {
namespace {

// Lists, dicts and sets may be shared or cyclic even when empty (they are mutable, so Python
// identity matters); the empty tuple is a singleton and prints as a scalar.
bool is_compound(const Value& v) noexcept {
  switch (v.kind()) {
    case Kind::kTuple:
      return !v.items().empty();
    case Kind::kList:
    case Kind::kDict:
    case Kind::kSet:
    case Kind::kFrozenSet:
    case Kind::kCall:
    case Kind::kPersistent:
      return true;
    default:
      return false;
  }
}

// Calls `f(child, nested)` on each child of `v` in the order the printer writes them, at most
// `max_items` from each sequence of elements and every BUILD state (build() prints them all), so
// that both passes and the one-line estimate see exactly the values printed: a state the first
// pass skipped was never marked as shared, and a list whose state is itself then printed itself
// forever. `nested` is false for what prints beside `v` rather than inside it (the callable, a
// persistent id, BUILD states), which therefore keeps v's depth.
template <typename F>
void for_each_child(const Value& v, std::size_t max_items, F&& f) {
  const auto sequence = [&](std::span<const Value* const> items, bool nested) {
    for (std::size_t i = 0; i < items.size() && i < max_items; ++i)
      f(items[i], nested);
  };
  const auto entries = [&](std::span<const DictItem> items) {
    for (std::size_t i = 0; i < items.size() && i < max_items; ++i) {
      f(items[i].key, true);
      f(items[i].value, true);
    }
  };
  switch (v.kind()) {
    case Kind::kTuple:
    case Kind::kFrozenSet:
    case Kind::kList:
    case Kind::kSet:
      sequence(v.items(), true);
      break;
    case Kind::kDict:
      entries(v.dict_items());
      break;
    case Kind::kCall:
      f(&v.callable(), false);
      sequence(v.args().items(), true);
      if (v.kwargs() != nullptr) f(v.kwargs(), true);
      sequence(v.items(), true);
      entries(v.dict_items());
      sequence(v.added_items(), true);
      break;
    case Kind::kPersistent:
      f(&v.persistent_id(), false);
      break;
    default:
      return;
  }
  for (const Value* state : v.states())
    f(state, false);
}

std::size_t decimal_width(std::int64_t value) noexcept {
  std::size_t width = value < 0 ? 2 : 1;
  auto magnitude =
      value < 0 ? 0 - static_cast<std::uint64_t>(value) : static_cast<std::uint64_t>(value);
  while (magnitude >= 10) {
    magnitude /= 10;
    ++width;
  }
  return width;
}

// Python refuses str() of an int above 4300 digits (about 1785 bytes); hex is linear.
constexpr std::size_t kMaxDecimalBigIntBytes = 1785;

std::string big_int_text(std::span<const std::byte> le) {
  const bool negative = !le.empty() && (std::to_integer<unsigned>(le.back()) & 0x80) != 0;
  std::vector<std::uint8_t> magnitude(le.size());
  unsigned carry = 1;
  for (std::size_t i = 0; i < le.size(); ++i) {
    unsigned byte = std::to_integer<unsigned>(le[i]);
    if (negative) {
      byte = (~byte & 0xFF) + carry;
      carry = byte >> 8;
    }
    magnitude[i] = static_cast<std::uint8_t>(byte);
  }
  while (!magnitude.empty() && magnitude.back() == 0)
    magnitude.pop_back();
  std::string digits;
  if (magnitude.size() > kMaxDecimalBigIntBytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (std::size_t i = magnitude.size(); i-- > 0;) {
      digits.push_back(kHex[magnitude[i] >> 4]);
      digits.push_back(kHex[magnitude[i] & 0xF]);
    }
    const auto first = digits.find_first_not_of('0');
    return (negative ? "-0x" : "0x") + digits.substr(first == std::string::npos ? 0 : first);
  }
  // Repeated division by 10^9 of big-endian 32-bit limbs: quadratic, bounded above.
  std::vector<std::uint32_t> limbs((magnitude.size() + 3) / 4);
  for (std::size_t i = 0; i < magnitude.size(); ++i) {
    limbs[limbs.size() - 1 - i / 4] |= std::uint32_t{magnitude[i]} << (8 * (i % 4));
  }
  std::vector<std::uint32_t> chunks;
  while (!limbs.empty()) {
    std::uint64_t remainder = 0;
    for (auto& limb : limbs) {
      const std::uint64_t x = (remainder << 32) | limb;
      limb = static_cast<std::uint32_t>(x / 1'000'000'000);
      remainder = x % 1'000'000'000;
    }
    chunks.push_back(static_cast<std::uint32_t>(remainder));
    while (!limbs.empty() && limbs.front() == 0)
      limbs.erase(limbs.begin());
  }
  std::string text = negative ? "-" : "";
  text += chunks.empty() ? "0" : fmt::format("{}", chunks.back());
  for (std::size_t i = chunks.size(); i-- > 1;)
    text += fmt::format("{:09}", chunks[i - 1]);
  return text;
}

// Python's repr() of a float (Python/pystrtod.c, 'r' mode): the shortest digits that round-trip,
// in positional notation when the decimal point falls within 16 digits of them, else
// d.ddde±XX; integral values keep ".0".
std::string float_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  std::array<char, 64> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value,
                                    std::chars_format::scientific);
  const std::string_view scientific(buffer.data(),
                                    static_cast<std::size_t>(result.ptr - buffer.data()));
  const auto e = scientific.find('e');
  std::string_view mantissa = scientific.substr(0, e);
  const int exponent = std::stoi(std::string(scientific.substr(e + 1)));
  std::string sign;
  if (mantissa.front() == '-') {
    sign = "-";
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (const char c : mantissa)
    if (c != '.') digits.push_back(c);
  const int point = exponent + 1;  // digits before the decimal point
  if (point > -4 && point <= 16) {
    std::string text = sign;
    if (point <= 0) {
      text += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
    } else if (static_cast<std::size_t>(point) >= digits.size()) {
      text += digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0') + ".0";
    } else {
      text += digits.substr(0, static_cast<std::size_t>(point)) + "." +
              digits.substr(static_cast<std::size_t>(point));
    }
    return text;
  }
  std::string text = sign + digits.substr(0, 1);
  if (digits.size() > 1) text += "." + digits.substr(1);
  return text + fmt::format("e{}{:02}", exponent < 0 ? '-' : '+', std::abs(exponent));
}

// Decodes one UTF-8 sequence (surrogates included) at `p`; the input was validated.
std::uint32_t next_code_point(std::string_view s, std::size_t& i) noexcept {
  const auto c = static_cast<unsigned char>(s[i]);
  const auto cont = [&](std::size_t k) {
    return i + k < s.size()
               ? static_cast<std::uint32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F)
               : 0u;
  };
  std::uint32_t cp = c;
  std::size_t length = 1;
  if (c >= 0xF0) {
    cp = ((c & 0x07u) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    length = 4;
  } else if (c >= 0xE0) {
    cp = ((c & 0x0Fu) << 12) | (cont(1) << 6) | cont(2);
    length = 3;
  } else if (c >= 0xC0) {
    cp = ((c & 0x1Fu) << 6) | cont(1);
    length = 2;
  }
  i += std::min(length, s.size() - i);
  return cp;
}

constexpr std::size_t kMaxIndentLevels = 100;

char quote_for(std::string_view s) noexcept {
  return s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"'
                                                                                         : '\'';
}

// One ASCII character (below 0x80) as repr() writes it inside `quote`s, in a str or in bytes.
void append_ascii(std::string& out, unsigned char c, char quote) {
  if (c == '\\' || c == static_cast<unsigned char>(quote)) {
    out.push_back('\\');
    out.push_back(static_cast<char>(c));
  } else if (c == '\n') {
    out += "\\n";
  } else if (c == '\r') {
    out += "\\r";
  } else if (c == '\t') {
    out += "\\t";
  } else if (c < 0x20 || c == 0x7F) {
    out += fmt::format("\\x{:02x}", c);
  } else {
    out.push_back(static_cast<char>(c));
  }
}

// Python's repr() of a str, appended to `out`; at most `limit` bytes shown, then "...".
void append_text_repr(std::string& out, std::string_view s, std::size_t limit_bytes) {
  const std::size_t limit = std::min(s.size(), limit_bytes);
  // The quote Python would choose for what is shown: a long string referred to many times must
  // not be searched whole each time it is printed cut.
  const char quote = quote_for(s.substr(0, limit));
  out.push_back(quote);
  std::size_t i = 0;
  while (i < limit) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      append_ascii(out, c, quote);
      continue;
    }
    const std::size_t start = i;
    const std::uint32_t cp = next_code_point(s, i);
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      out += fmt::format("\\u{:04x}", cp);
    } else if (cp < 0xA0 || cp == 0xAD) {
      // C1 controls, and the soft hyphen, are not printable: Python escapes them.
      out += fmt::format("\\x{:02x}", cp);
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out.push_back(quote);
  if (limit < s.size()) out += "...";
}

// Python's repr() of bytes without the b prefix, appended to `out`; at most `limit` shown.
void append_bytes_repr(std::string& out, std::span<const std::byte> bytes,
                       std::size_t limit_bytes) {
  const std::string_view as_chars{reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  const std::size_t limit = std::min(bytes.size(), limit_bytes);
  const char quote = quote_for(as_chars.substr(0, limit));
  out.push_back(quote);
  for (std::size_t i = 0; i < limit; ++i) {
    const auto c = std::to_integer<unsigned char>(bytes[i]);
    if (c >= 0x80) {
      out += fmt::format("\\x{:02x}", c);  // bytes are not text: every high byte is escaped
    } else {
      append_ascii(out, c, quote);
    }
  }
  out.push_back(quote);
  if (limit < bytes.size()) out += "...";
}

class Printer {
 public:
  Printer(const PrintOptions& options, std::string& out, std::ostream* stream)
      : options_(options), out_(out), stream_(stream) {}

  void run(const Value& root) {
    find_shared(root);
    tasks_.push_back({Task::Type::kValue, false, 0, &root, {}, 0});
    while (!tasks_.empty()) {
      const Task task = tasks_.back();
      tasks_.pop_back();
      switch (task.type) {
        case Task::Type::kText:
          write(task.text);
          break;
        case Task::Type::kNewline:
          // Indentation stops growing at kMaxIndentLevels: the text of a deep tree then stays
          // linear in its size instead of quadratic.
          write("\n");
          out_.append(std::min(task.depth, kMaxIndentLevels) * options_.indent, ' ');
          break;
        case Task::Type::kMore:
          write(fmt::format("... ({} more)", task.count));
          break;
        case Task::Type::kLeave:
          on_path_.erase(task.value);
          break;
        case Task::Type::kValue:
          print_value(*task.value, task.depth, task.flat);
          break;
      }
      if (stream_ != nullptr && out_.size() >= 1 << 16) flush();
    }
    flush();
  }

 private:
  struct Task {
    enum class Type : std::uint8_t { kValue, kText, kNewline, kMore, kLeave } type;
    bool flat;
    std::size_t depth;
    const Value* value;
    std::string_view text;
    std::size_t count;
  };

  void write(std::string_view text) { out_.append(text); }
  void flush() {
    if (stream_ == nullptr) return;
    stream_->write(out_.data(), static_cast<std::streamsize>(out_.size()));
    out_.clear();
  }

  // Pass one: a preorder walk in print order, with the same depth and item cuts, marking each
  // container met a second time.
  void find_shared(const Value& root) {
    std::vector<std::pair<const Value*, std::size_t>> work{{&root, 0}};
    std::unordered_set<const Value*> seen;
    while (!work.empty()) {
      const Value* v = work.back().first;
      const std::size_t depth = work.back().second;
      work.pop_back();
      if (!is_compound(*v) || depth > options_.max_depth) continue;
      if (!seen.insert(v).second) {
        // The arena's sharing, not the pickle's: printed in full wherever met.
        if (!v->is_shared_constant()) shared_.insert(v);
        continue;
      }
      const std::size_t first = work.size();
      for_each_child(*v, options_.max_items, [&](const Value* child, bool nested) {
        work.emplace_back(child, nested ? depth + 1 : depth);
      });
      std::reverse(work.begin() + static_cast<std::ptrdiff_t>(first), work.end());
    }
  }

  [[nodiscard]] std::size_t atom_width(const Value& v) const {
    switch (v.kind()) {
      case Kind::kInt:
        return decimal_width(v.as_int());
      case Kind::kBigInt:
        return v.as_bytes().size() * 5 / 2;
      case Kind::kFloat:
        return 10;
      case Kind::kString:
      case Kind::kPython2String:
        return std::min(v.as_string().size(), options_.max_string) + 3;
      case Kind::kBytes:
      case Kind::kByteArray:
        return std::min(v.as_bytes().size(), options_.max_string) * 2 + 14;
      case Kind::kGlobal:
        return v.module().size() + v.name().size() + 1;
      default:
        return 5;
    }
  }

  // Whether `v` is small enough for one line: few values and a short estimated width. Bounded
  // work (inline_values nodes at most), however large `v` is.
  [[nodiscard]] bool fits_on_one_line(const Value& v) {
    constexpr std::size_t kMaxWidth = 80;
    std::size_t values = 0;
    std::size_t width = 0;
    mini_work_.assign(1, &v);
    mini_seen_.clear();
    while (!mini_work_.empty()) {
      const Value* x = mini_work_.back();
      mini_work_.pop_back();
      if (++values > options_.inline_values) return false;
      width += 2 + (is_compound(*x) ? 2 : atom_width(*x));
      if (width > kMaxWidth) return false;
      if (!is_compound(*x)) continue;
      if (std::find(mini_seen_.begin(), mini_seen_.end(), x) != mini_seen_.end()) continue;
      mini_seen_.push_back(x);
      // No more children than could fit: a large container shared by many parents was walked
      // whole for each of them.
      const std::size_t enough =
          options_.inline_values == SIZE_MAX ? SIZE_MAX : options_.inline_values + 1;
      for_each_child(*x, std::min(options_.max_items, enough),
                     [&](const Value* child, bool) { mini_work_.push_back(child); });
      if (mini_work_.size() > options_.inline_values) return false;
    }
    return true;
  }

  void print_value(const Value& v, std::size_t depth, bool flat) {
    if (!is_compound(v)) {
      write_atom(v);
      return;
    }
    if (depth > options_.max_depth) {
      write("...");
      return;
    }
    const bool shared = !shared_.empty() && shared_.contains(&v);
    if (shared) {
      if (const auto it = labels_.find(&v); it != labels_.end()) {
        write(fmt::format("<{} #{}>", on_path_.contains(&v) ? "cycle" : "ref", it->second));
        return;
      }
      const std::size_t label = labels_.size() + 1;
      labels_.emplace(&v, label);
      write(fmt::format("#{}=", label));
      on_path_.insert(&v);
    }
    flat = flat || fits_on_one_line(v);
    pending_.clear();
    build(v, depth, flat);
    if (shared) pending_.push_back({Task::Type::kLeave, flat, depth, &v, {}, 0});
    tasks_.insert(tasks_.end(), pending_.rbegin(), pending_.rend());
  }

  void text(std::string_view s) {
    pending_.push_back({Task::Type::kText, false, 0, nullptr, s, 0});
  }
  void value(const Value* v, std::size_t depth, bool flat) {
    pending_.push_back({Task::Type::kValue, flat, depth, v, {}, 0});
  }
  void newline(std::size_t depth) {
    pending_.push_back({Task::Type::kNewline, false, depth, nullptr, {}, 0});
  }

  // Between an opening and a closing bracket: one element per line, or all on one line.
  template <typename EmitOne>
  void elements(std::size_t count, std::size_t depth, bool flat, std::string_view open,
                std::string_view close, bool trailing_comma_if_one, EmitOne&& emit_one,
                const Value* kwargs = nullptr) {
    text(open);
    const std::size_t shown = std::min(count, options_.max_items);
    const std::size_t total = shown + (count > shown ? 1 : 0) + (kwargs != nullptr ? 1 : 0);
    std::size_t written = 0;
    const auto separator = [&] {
      if (flat) {
        if (written > 0) text(", ");
      } else {
        newline(depth + 1);
      }
    };
    const auto terminator = [&] {
      ++written;
      if (!flat) text(",");
    };
    for (std::size_t i = 0; i < shown; ++i) {
      separator();
      emit_one(i);
      terminator();
    }
    if (count > shown) {
      separator();
      pending_.push_back({Task::Type::kMore, false, 0, nullptr, {}, count - shown});
      terminator();
    }
    if (kwargs != nullptr) {
      separator();
      text("**");
      value(kwargs, depth + 1, flat);
      terminator();
    }
    if (flat && trailing_comma_if_one && total == 1) text(",");
    if (!flat && total > 0) newline(depth);
    text(close);
  }

  void sequence(std::span<const Value* const> items, std::size_t depth, bool flat,
                std::string_view open, std::string_view close, bool one_tuple = false) {
    elements(items.size(), depth, flat, open, close, one_tuple,
             [&](std::size_t i) { value(items[i], depth + 1, flat); });
  }

  void entries(std::span<const DictItem> items, std::size_t depth, bool flat) {
    elements(items.size(), depth, flat, "{", "}", false, [&](std::size_t i) {
      value(items[i].key, depth + 1, flat);
      text(": ");
      value(items[i].value, depth + 1, flat);
    });
  }

  void build(const Value& v, std::size_t depth, bool flat) {
    switch (v.kind()) {
      case Kind::kTuple:
        sequence(v.items(), depth, flat, "(", ")", true);
        break;
      case Kind::kList:
        sequence(v.items(), depth, flat, "[", "]");
        break;
      case Kind::kDict:
        entries(v.dict_items(), depth, flat);
        break;
      case Kind::kSet:
      case Kind::kFrozenSet: {
        // Python's repr: set() and frozenset() when empty, {1, 2} and frozenset({1, 2}) if not.
        const bool frozen = v.kind() == Kind::kFrozenSet;
        if (v.items().empty()) {
          text(frozen ? "frozenset()" : "set()");
        } else {
          sequence(v.items(), depth, flat, frozen ? "frozenset({" : "{", frozen ? "})" : "}");
        }
        break;
      }
      case Kind::kPersistent:
        text("persistent(");
        value(&v.persistent_id(), depth, flat);
        text(")");
        break;
      case Kind::kCall: {
        const Value& callable = v.callable();
        if (callable.is(Kind::kGlobal)) {
          text(callable.module());
          text(".");
          text(callable.name());
        } else {
          value(&callable, depth, flat);
        }
        const auto args = v.args().items();
        elements(
            args.size(), depth, flat, "(", ")", false,
            [&](std::size_t i) { value(args[i], depth + 1, flat); }, v.kwargs());
        if (!v.items().empty()) {
          text(" items=");
          sequence(v.items(), depth, flat, "[", "]");
        }
        if (!v.dict_items().empty()) {
          text(" items=");
          entries(v.dict_items(), depth, flat);
        }
        if (!v.added_items().empty()) {
          text(" items=");
          sequence(v.added_items(), depth, flat, "{", "}");
        }
        break;
      }
      default:
        break;
    }
    for (const Value* state : v.states()) {
      text(" state=");
      value(state, depth, flat);
    }
  }

  void write_atom(const Value& v) {
    switch (v.kind()) {
      case Kind::kNone:
        write("None");
        break;
      case Kind::kBool:
        write(v.as_bool() ? "True" : "False");
        break;
      case Kind::kInt:
        write(fmt::format("{}", v.as_int()));
        break;
      case Kind::kBigInt: {
        // Cut as strings are, and made once per value: a number of thousands of digits that
        // the pickle refers to thousands of times printed hundreds of MB, and its decimal
        // form costs the square of its size each time it is made.
        auto [it, made] = big_int_texts_.try_emplace(&v);
        if (made) {
          it->second = big_int_text(v.as_bytes());
          if (it->second.size() > options_.max_string) {
            it->second.resize(options_.max_string);
            it->second += "...";
          }
        }
        write(it->second);
        break;
      }
      case Kind::kFloat:
        write(float_text(v.as_float()));
        break;
      case Kind::kString:
        write_text(v.as_string());
        break;
      case Kind::kPython2String:
        if (text::check_utf8(shown_text(v.as_string())) == text::Utf8::kValid) {
          write_text(v.as_string());
        } else {
          write_bytes("b", v.as_bytes(), "");
        }
        break;
      case Kind::kBytes:
        write_bytes("b", v.as_bytes(), "");
        break;
      case Kind::kByteArray:
        write_bytes("bytearray(b", v.as_bytes(), ")");
        break;
      case Kind::kGlobal:
        write(v.module());
        write(".");
        write(v.name());
        break;
      case Kind::kTuple:
        write("()");
        break;
      default:
        write("?");
    }
  }

  // The part of `s` a cut print shows, to the end of the character the cut falls in (which
  // append_text_repr writes whole): what a Python 2 str is checked as UTF-8 by (a 4 MB one
  // referred to 20 000 times was checked whole each time it was printed).
  [[nodiscard]] std::string_view shown_text(std::string_view s) const noexcept {
    if (s.size() <= options_.max_string) return s;
    std::size_t end = options_.max_string;
    for (int more = 0;
         more < 3 && end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80; ++more)
      ++end;
    return s.substr(0, end);
  }

  void write_text(std::string_view s) {
    std::string out;
    append_text_repr(out, s, options_.max_string);
    write(out);
  }

  void write_bytes(std::string_view prefix, std::span<const std::byte> bytes,
                   std::string_view suffix) {
    std::string out(prefix);
    append_bytes_repr(out, bytes, options_.max_string);
    out += suffix;
    write(out);
  }

  const PrintOptions& options_;
  std::string& out_;
  std::ostream* stream_;
  std::vector<Task> tasks_;
  std::vector<Task> pending_;
  std::unordered_set<const Value*> shared_;
  std::unordered_map<const Value*, std::size_t> labels_;
  std::unordered_map<const Value*, std::string> big_int_texts_;
  std::unordered_set<const Value*> on_path_;
  std::vector<const Value*> mini_work_;
  std::vector<const Value*> mini_seen_;
};

}  // namespace

std::string print(const Value& root, const PrintOptions& options) {
  std::string out;
  Printer(options, out, nullptr).run(root);
  return out;
}

void print(std::ostream& out, const Value& root, const PrintOptions& options) {
  std::string buffer;
  Printer(options, buffer, &out).run(root);
}

namespace {

// The bytes a key call spells, or nullopt (a malformed spelling names no key; it is not this
// function's to report).
std::optional<std::string> bytes_of_key(const Value& value) {
  try {
    return bytes_of(value);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Keys nest tuples rarely and shallowly; deeper ones get no text rather than a deep recursion.
constexpr int kMaxKeyTupleDepth = 16;

bool append_key_repr(std::string& out, const Value& value, int depth) {
  switch (value.kind()) {
    case Kind::kString:
      append_text_repr(out, value.as_string(), SIZE_MAX);
      return true;
    case Kind::kPython2String:
      if (text::check_utf8(value.as_string()) != text::Utf8::kValid) return false;
      append_text_repr(out, value.as_string(), SIZE_MAX);
      return true;
    case Kind::kBytes:
      out += 'b';
      append_bytes_repr(out, value.as_bytes(), SIZE_MAX);
      return true;
    case Kind::kCall: {
      // Protocol 2 spells bytes as _codecs.encode(text, 'latin1').
      auto bytes = bytes_of_key(value);
      if (!bytes) return false;
      out += 'b';
      append_bytes_repr(out, std::as_bytes(std::span(*bytes)), SIZE_MAX);
      return true;
    }
    case Kind::kTuple: {
      if (depth >= kMaxKeyTupleDepth) return false;
      const auto items = value.items();
      out += '(';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        if (!append_key_repr(out, *items[i], depth + 1)) return false;
      }
      if (items.size() == 1) out += ',';
      out += ')';
      return true;
    }
    default: {
      auto scalar = key_text(value);
      if (!scalar) return false;
      out += *scalar;
      return true;
    }
  }
}

// At least how many bytes key_text(value) would write, counted no further than past `limit`
// (a wide tuple is not walked whole).
std::size_t key_text_size_at_least(const Value& value, std::size_t limit, int depth) {
  switch (value.kind()) {
    case Kind::kString:
    case Kind::kPython2String:
      return value.as_string().size();
    case Kind::kBytes:
      return value.as_bytes().size();
    case Kind::kBigInt:
      // Minimal two's complement in n bytes: a number of at least n - 1 decimal digits.
      return value.as_bytes().empty() ? 0 : value.as_bytes().size() - 1;
    case Kind::kCall: {
      // _codecs.encode(text, 'latin1'): at least a byte per character.
      const auto args = value.args().items();
      return !args.empty() && args[0]->is(Kind::kString) ? args[0]->as_string().size() : 0;
    }
    case Kind::kTuple: {
      if (depth >= kMaxKeyTupleDepth) return 0;
      std::size_t size = 2;
      for (const Value* item : value.items()) {
        if (size > limit) break;
        size += key_text_size_at_least(*item, limit, depth + 1) + 1;
      }
      return size;
    }
    default:
      return 0;
  }
}

}  // namespace

std::optional<std::string> key_text(const Value& key, std::size_t max_bytes) {
  if (key_text_size_at_least(key, max_bytes, 0) > max_bytes) return std::nullopt;
  auto text = key_text(key);
  if (text && text->size() > max_bytes) return std::nullopt;
  return text;
}

std::optional<std::string> key_text(const Value& key) {
  switch (key.kind()) {
    case Kind::kString:
      return std::string(key.as_string());
    case Kind::kPython2String:
      // torch.load decodes Python 2 str as UTF-8 (its default encoding argument).
      if (text::check_utf8(key.as_string()) != text::Utf8::kValid) return std::nullopt;
      return std::string(key.as_string());
    case Kind::kInt:
      return fmt::format("{}", key.as_int());
    case Kind::kBigInt:
      if (key.as_bytes().size() > kMaxDecimalBigIntBytes) return std::nullopt;
      return big_int_text(key.as_bytes());
    case Kind::kBool:
      return std::string(key.as_bool() ? "True" : "False");
    case Kind::kNone:
      return std::string("None");
    case Kind::kFloat:
      return float_text(key.as_float());
    case Kind::kBytes:
    case Kind::kCall:
    case Kind::kTuple: {
      std::string text;
      if (!append_key_repr(text, key, 0)) return std::nullopt;
      return text;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace pthload::pickle
