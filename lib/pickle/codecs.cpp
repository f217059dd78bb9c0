// spelling_of, bytes_of and latin1_bytes: the reverse of how CPython pickles bytes below protocol 3
// (see codecs.hpp; Lib/pickle.py save_bytes, Lib/encodings/aliases.py for the encoding names).
#include "pickle/codecs.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "pthload/error.hpp"

namespace pthload::pickle {
namespace {

using Form = BytesSpelling::Form;

// The form text takes in `encoding_name` (Python's codec lookup normalises case and '_'); null
// is encode()'s default, utf-8.
Form form_of_encoding(const Value* encoding_name) {
  if (encoding_name == nullptr) return Form::kUtf8;
  std::string lower(encoding_name->as_string());
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::replace(lower.begin(), lower.end(), '_', '-');
  static constexpr std::array<std::string_view, 6> kLatin1{"latin1",    "latin-1", "iso-8859-1",
                                                           "iso8859-1", "l1",      "8859"};
  static constexpr std::array<std::string_view, 3> kUtf8{"utf-8", "utf8", "u8"};
  if (std::find(kLatin1.begin(), kLatin1.end(), lower) != kLatin1.end()) return Form::kLatin1;
  if (std::find(kUtf8.begin(), kUtf8.end(), lower) != kUtf8.end()) return Form::kUtf8;
  throw UnsupportedError(Errc::kPickleBadArgument, "pickle: bytes spelled with encoding '" +
                                                       std::string(encoding_name->as_string()) +
                                                       "' are not supported");
}

bool is_builtin(const Value& callable, std::string_view name) {
  return callable.is_global("builtins", name) || callable.is_global("__builtin__", name);
}

// `depth` bounds bytearray(bytes(bytearray(...))) chains: real pickles nest two levels.
std::optional<BytesSpelling> spelling_of(const Value& value, int depth) {
  if (value.is(Kind::kBytes) || value.is(Kind::kByteArray)) {
    return BytesSpelling{.form = Form::kRaw, .source = &value};
  }
  if (!value.is(Kind::kCall) || depth > 4) return std::nullopt;
  const Value& callable = value.callable();
  const auto args = value.args().items();
  const auto is_text = [](const Value* v) { return v->is(Kind::kString); };
  if (callable.is_global("_codecs", "encode")) {
    if (args.size() == 1 && is_text(args[0])) {
      return BytesSpelling{.form = form_of_encoding(nullptr), .source = args[0]};
    }
    if (args.size() == 2 && is_text(args[0]) && is_text(args[1])) {
      return BytesSpelling{.form = form_of_encoding(args[1]), .source = args[0]};
    }
    return std::nullopt;
  }
  if (is_builtin(callable, "bytes") || is_builtin(callable, "bytearray")) {
    if (args.empty()) return BytesSpelling{};
    if (args.size() == 1) return spelling_of(*args[0], depth + 1);
    if (args.size() == 2 && is_text(args[0]) && is_text(args[1])) {
      return BytesSpelling{.form = form_of_encoding(args[1]), .source = args[0]};
    }
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

std::optional<BytesSpelling> spelling_of(const Value& value) {
  return spelling_of(value, 0);
}

std::string bytes_of(const BytesSpelling& spelling) {
  switch (spelling.form) {
    case Form::kEmpty:
      return std::string();
    case Form::kRaw: {
      const auto bytes = spelling.source->as_bytes();
      return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
    case Form::kUtf8:
      // Python's strict UTF-8 encoder refuses lone surrogates.
      if (spelling.source->has_surrogates()) {
        throw FormatError(Errc::kPickleBadArgument,
                          "pickle: text with lone surrogates cannot be encoded as UTF-8");
      }
      return std::string(spelling.source->as_string());
    case Form::kLatin1:
      break;
  }
  auto bytes = latin1_bytes(spelling.source->as_string());
  if (!bytes) {
    throw FormatError(Errc::kPickleBadArgument,
                      "pickle: text spelling bytes has a code point above 255");
  }
  return std::move(*bytes);
}

std::optional<std::string> bytes_of(const Value& value) {
  const auto spelling = spelling_of(value, 0);
  if (!spelling) return std::nullopt;
  return bytes_of(*spelling);
}

}  // namespace pthload::pickle
