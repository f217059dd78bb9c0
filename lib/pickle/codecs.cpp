// bytes_of and latin1_bytes: the reverse of how CPython pickles bytes below protocol 3 (see
// codecs.hpp; Lib/pickle.py save_bytes, Lib/encodings/aliases.py for the encoding names).
#include "pickle/codecs.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "pthload/error.hpp"

namespace pthload::pickle {
namespace {

enum class Encoding { kLatin1, kUtf8, kOther };

Encoding encoding_of(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::replace(lower.begin(), lower.end(), '_', '-');
  static constexpr std::array<std::string_view, 6> kLatin1{"latin1",    "latin-1", "iso-8859-1",
                                                           "iso8859-1", "l1",      "8859"};
  static constexpr std::array<std::string_view, 3> kUtf8{"utf-8", "utf8", "u8"};
  if (std::find(kLatin1.begin(), kLatin1.end(), lower) != kLatin1.end()) return Encoding::kLatin1;
  if (std::find(kUtf8.begin(), kUtf8.end(), lower) != kUtf8.end()) return Encoding::kUtf8;
  return Encoding::kOther;
}

bool is_builtin(const Value& callable, std::string_view name) {
  return callable.is_global("builtins", name) || callable.is_global("__builtin__", name);
}

std::string encode(const Value& text, const Value* encoding_name) {
  const Encoding encoding =
      encoding_name == nullptr ? Encoding::kUtf8 : encoding_of(encoding_name->as_string());
  if (encoding == Encoding::kOther) {
    throw UnsupportedError(Errc::kPickleBadArgument, "pickle: bytes spelled with encoding '" +
                                                         std::string(encoding_name->as_string()) +
                                                         "' are not supported");
  }
  if (encoding == Encoding::kUtf8) {
    // Python's strict UTF-8 encoder refuses lone surrogates.
    if (text.has_surrogates()) {
      throw FormatError(Errc::kPickleBadArgument,
                        "pickle: text with lone surrogates cannot be encoded as UTF-8");
    }
    return std::string(text.as_string());
  }
  auto bytes = latin1_bytes(text.as_string());
  if (!bytes) {
    throw FormatError(Errc::kPickleBadArgument,
                      "pickle: text spelling bytes has a code point above 255");
  }
  return std::move(*bytes);
}

// `depth` bounds bytearray(bytes(bytearray(...))) chains: real pickles nest two levels.
std::optional<std::string> bytes_of(const Value& value, int depth) {
  if (value.is(Kind::kBytes) || value.is(Kind::kByteArray)) {
    const auto bytes = value.as_bytes();
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  if (!value.is(Kind::kCall) || depth > 4) return std::nullopt;
  const Value& callable = value.callable();
  const auto args = value.args().items();
  const auto is_text = [](const Value* v) { return v->is(Kind::kString); };
  if (callable.is_global("_codecs", "encode")) {
    if (args.size() == 1 && is_text(args[0])) return encode(*args[0], nullptr);
    if (args.size() == 2 && is_text(args[0]) && is_text(args[1])) return encode(*args[0], args[1]);
    return std::nullopt;
  }
  if (is_builtin(callable, "bytes") || is_builtin(callable, "bytearray")) {
    if (args.empty()) return std::string();
    if (args.size() == 1) return bytes_of(*args[0], depth + 1);
    if (args.size() == 2 && is_text(args[0]) && is_text(args[1])) return encode(*args[0], args[1]);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> latin1_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if ((c == 0xC2 || c == 0xC3) && i + 1 < text.size() &&
               (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
      // U+0080-U+00FF: two bytes, 110000xx 10xxxxxx.
      out.push_back(
          static_cast<char>(((c & 0x03) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F)));
      ++i;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<std::string> bytes_of(const Value& value) {
  return bytes_of(value, 0);
}

}  // namespace pthload::pickle
