// Decoding of the pickle's text arguments: protocol 0's decimal ints and floats, STRING's
// quoted escapes, UNICODE's raw-unicode-escape, and UTF-8 validation (CPython
// Modules/_pickle.c load_int/load_long/load_float/load_string/load_unicode/load_binunicode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pthload::pickle::text {

/// How a byte string fares as UTF-8.
enum class Utf8 : std::uint8_t {
  kInvalid,
  kValid,
  kValidWithSurrogates,  ///< valid except for encoded U+D800-U+DFFF (CPython's 'surrogatepass')
};

/// Validates `bytes` as UTF-8: no overlong forms, nothing above U+10FFFF; encoded surrogates
/// are reported apart, since CPython writes them (BINUNICODE uses 'surrogatepass').
[[nodiscard]] Utf8 check_utf8(std::string_view bytes) noexcept;

/// Whether every byte is below 0x80 (then check_utf8 says kValid). Inline, for the names and
/// keys of a checkpoint, nearly all short and ASCII, before check_utf8 is called for the rest.
[[nodiscard]] inline bool is_ascii(std::string_view bytes) noexcept {
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  std::uint64_t bits = 0;
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    bits |= word;
  }
  if (n >= 4) {
    // 4 to 7 bytes left: two loads that overlap cover them.
    std::uint32_t head;
    std::uint32_t tail;
    std::memcpy(&head, p, 4);
    std::memcpy(&tail, p + n - 4, 4);
    bits |= head | tail;
  } else if (n > 0) {
    // 1 to 3 bytes left: the first, the middle and the last are all of them.
    bits |= static_cast<unsigned char>(p[0]) | static_cast<unsigned char>(p[n / 2]) |
            static_cast<unsigned char>(p[n - 1]);
  }
  return (bits & 0x8080'8080'8080'8080) == 0;
}

/// CPython's limit on decimal digits converted to an int (sys.int_info.default_max_str_digits):
/// the conversion is quadratic, so longer text is refused as CPython 3.11+ refuses it.
inline constexpr std::size_t kMaxDecimalDigits = 4300;

/// An integer read from text: an int64 when it fits, else two's-complement little-endian bytes.
struct DecimalInt {
  std::int64_t value = 0;
  std::vector<std::byte> big;  ///< non-empty when the value does not fit in int64
};

/// Parses an optionally signed run of decimal digits (at most kMaxDecimalDigits). Leading zeros
/// are allowed (LONG reads base 10). nullopt when the text is anything else.
[[nodiscard]] std::optional<DecimalInt> parse_decimal(std::string_view text);

/// Parses a Python float literal as FLOAT writes it: optional sign, decimal or exponent form,
/// inf/infinity/nan in any case. nullopt unless the whole text is one.
[[nodiscard]] std::optional<double> parse_float(std::string_view text) noexcept;

/// Decodes the body of a STRING argument (the quotes removed) as Python's
/// codecs.escape_decode does: \\ \' \" \a \b \f \n \r \t \v, \<newline>, up to three octal
/// digits, \xhh; any other backslash stays. nullopt for a trailing backslash or a bad \x.
[[nodiscard]] std::optional<std::string> unescape_string(std::string_view body);

/// Decodes UNICODE's raw-unicode-escape text to UTF-8: bytes are Latin-1 code points except a
/// \uXXXX or \UXXXXXXXX preceded by an odd number of backslashes. Lone surrogates become their
/// 3-byte form and set `has_surrogates`. nullopt for a truncated escape or one past U+10FFFF.
[[nodiscard]] std::optional<std::string> decode_raw_unicode_escape(std::string_view text,
                                                                   bool& has_surrogates);

/// Appends the UTF-8 form of `code_point` (surrogates included, in their 3-byte form).
void append_utf8(std::string& out, std::uint32_t code_point);

}  // namespace pthload::pickle::text
