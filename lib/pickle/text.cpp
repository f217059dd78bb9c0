// Text argument decoding for the pickle machine (see text.hpp; CPython Objects/bytesobject.c
// _PyBytes_DecodeEscape, Objects/unicodeobject.c _PyUnicode_DecodeRawUnicodeEscape).
#include "pickle/text.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace pthload::pickle::text {
namespace {

constexpr bool is_continuation(unsigned char c) noexcept {
  return (c & 0xC0) == 0x80;
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool equals_ignoring_case(std::string_view a, std::string_view lower) noexcept {
  if (a.size() != lower.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

}  // namespace

Utf8 check_utf8(std::string_view bytes) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* const end = p + bytes.size();
  bool surrogates = false;
  while (p < end) {
    // Most names and keys are ASCII: skip eight bytes at a time while no high bit is set.
    while (end - p >= 8) {
      std::uint64_t word;
      std::memcpy(&word, p, 8);
      if ((word & 0x8080808080808080ull) != 0) break;
      p += 8;
    }
    if (p == end) break;
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) {
      if (end - p < 2 || !is_continuation(p[1])) return Utf8::kInvalid;
      p += 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      if (end - p < 3 || !is_continuation(p[1]) || !is_continuation(p[2])) return Utf8::kInvalid;
      if (c == 0xE0 && p[1] < 0xA0) return Utf8::kInvalid;  // overlong
      if (c == 0xED && p[1] >= 0xA0) surrogates = true;
      p += 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      if (end - p < 4 || !is_continuation(p[1]) || !is_continuation(p[2]) ||
          !is_continuation(p[3])) {
        return Utf8::kInvalid;
      }
      if (c == 0xF0 && p[1] < 0x90) return Utf8::kInvalid;   // overlong
      if (c == 0xF4 && p[1] >= 0x90) return Utf8::kInvalid;  // above U+10FFFF
      p += 4;
    } else {
      return Utf8::kInvalid;
    }
  }
  return surrogates ? Utf8::kValidWithSurrogates : Utf8::kValid;
}

std::optional<DecimalInt> parse_decimal(std::string_view text) {
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || text.size() > kMaxDecimalDigits) return std::nullopt;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  DecimalInt result;
  // Magnitude first, then the sign: the magnitude of INT64_MIN does not fit in int64.
  std::uint64_t magnitude = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), magnitude);
  if (ec == std::errc{} && ptr == text.data() + text.size()) {
    if (!negative && magnitude <= static_cast<std::uint64_t>(INT64_MAX)) {
      result.value = static_cast<std::int64_t>(magnitude);
      return result;
    }
    if (negative && magnitude <= static_cast<std::uint64_t>(INT64_MAX) + 1) {
      result.value = static_cast<std::int64_t>(0 - magnitude);
      return result;
    }
  }
  // Base 10^9 limbs, least significant first; quadratic, hence the digit limit above.
  std::vector<std::uint32_t> limbs;
  for (const char c : text) {
    std::uint64_t carry = static_cast<std::uint64_t>(c - '0');
    for (auto& limb : limbs) {
      const std::uint64_t x = std::uint64_t{limb} * 10 + carry;
      limb = static_cast<std::uint32_t>(x);
      carry = x >> 32;
    }
    if (carry != 0) limbs.push_back(static_cast<std::uint32_t>(carry));
  }
  // Little-endian magnitude bytes plus a zero byte, so the top bit is the sign; then negate.
  std::vector<std::byte>& bytes = result.big;
  for (const auto limb : limbs) {
    for (int i = 0; i < 4; ++i)
      bytes.push_back(static_cast<std::byte>(limb >> (8 * i)));
  }
  bytes.push_back(std::byte{0});
  if (negative) {
    unsigned carry = 1;
    for (auto& b : bytes) {
      const unsigned x = (~std::to_integer<unsigned>(b) & 0xFF) + carry;
      b = static_cast<std::byte>(x);
      carry = x >> 8;
    }
  }
  return result;
}

std::optional<double> parse_float(std::string_view text) noexcept {
  std::string_view body = text;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body.empty()) return std::nullopt;
  if (equals_ignoring_case(body, "inf") || equals_ignoring_case(body, "infinity")) {
    return negative ? -HUGE_VAL : HUGE_VAL;
  }
  if (equals_ignoring_case(body, "nan"))
    return negative ? -std::numeric_limits<double>::quiet_NaN()
                    : std::numeric_limits<double>::quiet_NaN();
  // from_chars would also take "nan(...)" and "infinity" forms; those were handled above and
  // anything else it accepts beyond digits is refused here.
  for (const char c : body) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      return std::nullopt;
    }
  }
  double value = 0;
  const auto [ptr, ec] =
      std::from_chars(body.data(), body.data() + body.size(), value, std::chars_format::general);
  if (ptr != body.data() + body.size()) return std::nullopt;
  // CPython's load_float refuses a literal too large for a double ("value too large to
  // convert to float") but rounds one too small to zero.
  if (ec == std::errc::result_out_of_range) {
    const auto e = body.find_first_of("eE");
    if (e == std::string_view::npos || e + 1 >= body.size() || body[e + 1] != '-') {
      return std::nullopt;
    }
    value = 0.0;
  } else if (ec != std::errc{}) {
    return std::nullopt;
  }
  return negative ? -value : value;
}

std::optional<std::string> unescape_string(std::string_view body) {
  std::string out;
  out.reserve(body.size());
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (++i == body.size()) return std::nullopt;  // "Trailing \ in string"
    const char e = body[i];
    switch (e) {
      case '\n':
        break;
      case '\\':
      case '\'':
      case '"':
        out.push_back(e);
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x': {
        if (i + 2 >= body.size() || hex_value(body[i + 1]) < 0 || hex_value(body[i + 2]) < 0) {
          return std::nullopt;
        }
        out.push_back(static_cast<char>(hex_value(body[i + 1]) * 16 + hex_value(body[i + 2])));
        i += 2;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          // Up to three octal digits; CPython keeps the low 8 bits of \400-\777.
          unsigned value = static_cast<unsigned>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            value = value * 8 + static_cast<unsigned>(body[++i] - '0');
          }
          out.push_back(static_cast<char>(value & 0xFF));
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::optional<std::string> decode_raw_unicode_escape(std::string_view text, bool& has_surrogates) {
  std::string out;
  out.reserve(text.size());
  has_surrogates = false;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c != '\\') {
      append_utf8(out, c);
      ++i;
      continue;
    }
    // A run of backslashes is literal; only an odd-length run followed by u/U starts an escape
    // (the last backslash of the run belongs to it).
    const std::size_t run_start = i;
    while (i < text.size() && text[i] == '\\')
      ++i;
    const std::size_t run = i - run_start;
    const bool escape = run % 2 == 1 && i < text.size() && (text[i] == 'u' || text[i] == 'U');
    out.append(escape ? run - 1 : run, '\\');
    if (!escape) continue;
    const std::size_t digits = text[i] == 'u' ? 4 : 8;
    ++i;
    if (text.size() - i < digits) return std::nullopt;
    std::uint32_t cp = 0;
    for (std::size_t k = 0; k < digits; ++k) {
      const int h = hex_value(text[i + k]);
      if (h < 0) return std::nullopt;
      cp = cp * 16 + static_cast<std::uint32_t>(h);
    }
    if (cp > 0x10FFFF) return std::nullopt;
    if (cp >= 0xD800 && cp <= 0xDFFF) has_surrogates = true;
    append_utf8(out, cp);
    i += digits;
  }
  return out;
}

}  // namespace pthload::pickle::text
