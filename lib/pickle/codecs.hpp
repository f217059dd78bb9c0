// Turning the calls by which pickles spell bytes back into bytes: protocol 2 writes b'..' as
// `_codecs.encode('..', 'latin1')` and bytearray as `bytearray(<that>)` (CPython Lib/pickle.py
// save_bytes/save_bytearray; Objects/bytearrayobject.c bytearray_reduce_ex).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pickle/value.hpp"

namespace pthload::pickle {

/// How a value spells bytes, short of making them: the node that holds them and what turns it
/// into bytes. Equal spellings stand for equal bytes, so a reader that meets one spelling many
/// times (a memoized call shared by many arrays) can decode it once.
struct BytesSpelling {
  enum class Form : std::uint8_t {
    kEmpty,   ///< bytes() or bytearray() called with nothing; `source` is null
    kRaw,     ///< `source` is bytes or a bytearray, taken as it is
    kLatin1,  ///< `source` is text, encoded as Latin-1
    kUtf8,    ///< `source` is text, encoded as UTF-8
  };
  Form form = Form::kEmpty;
  const Value* source = nullptr;
  friend bool operator==(const BytesSpelling&, const BytesSpelling&) = default;
};

/// How `value` spells bytes (the forms bytes_of(const Value&) recognises), without decoding
/// anything, or nullopt when it is no spelling of bytes. Throws UnsupportedError
/// (kPickleBadArgument) for an encoding other than latin1 or utf-8.
[[nodiscard]] std::optional<BytesSpelling> spelling_of(const Value& value);

/// The bytes `spelling` stands for. Throws FormatError (kPickleBadArgument) when its text has a
/// code point the encoding cannot hold (or is not valid UTF-8).
[[nodiscard]] std::string bytes_of(const BytesSpelling& spelling);

/// The bytes `value` stands for once Python has loaded it, or nullopt when it is not a spelling
/// of bytes. Recognised: kBytes and kByteArray values; REDUCE calls of `_codecs.encode(text)` or
/// `_codecs.encode(text, encoding)` with encoding latin1 (also latin-1, iso-8859-1, iso8859-1,
/// l1) or utf-8 (utf8, the default); `builtins.bytes`/`builtins.bytearray` (or `__builtin__.`)
/// called with nothing, with bytes as spelled here, or with (text, encoding). Throws
/// FormatError (kPickleBadArgument) when the text has a code point the encoding cannot hold (or
/// is not valid UTF-8), UnsupportedError (kPickleBadArgument) for another encoding. Equal to
/// bytes_of(*spelling_of(value)).
[[nodiscard]] std::optional<std::string> bytes_of(const Value& value);

/// The Latin-1 bytes of UTF-8 `text` whose code points are all below 256 (what
/// `_codecs.encode(text, 'latin1')` gives), or nullopt when one is not.
[[nodiscard]] std::optional<std::string> latin1_bytes(std::string_view text);

}  // namespace pthload::pickle
