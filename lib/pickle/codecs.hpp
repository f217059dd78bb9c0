// Turning the calls by which pickles spell bytes back into bytes: protocol 2 writes b'..' as
// `_codecs.encode('..', 'latin1')` and bytearray as `bytearray(<that>)` (CPython Lib/pickle.py
// save_bytes/save_bytearray; Objects/bytearrayobject.c bytearray_reduce_ex).
#pragma once

#include <optional>
#include <string>

#include "pickle/value.hpp"

namespace pthload::pickle {

/// The bytes `value` stands for once Python has loaded it, or nullopt when it is not a spelling
/// of bytes. Recognised: kBytes and kByteArray values; REDUCE calls of `_codecs.encode(text)` or
/// `_codecs.encode(text, encoding)` with encoding latin1 (also latin-1, iso-8859-1, iso8859-1,
/// l1) or utf-8 (utf8, the default); `builtins.bytes`/`builtins.bytearray` (or `__builtin__.`)
/// called with nothing, with bytes as spelled here, or with (text, encoding). Throws
/// FormatError (kPickleBadArgument) when the text has a code point the encoding cannot hold (or
/// is not valid UTF-8), UnsupportedError (kPickleBadArgument) for another encoding.
[[nodiscard]] std::optional<std::string> bytes_of(const Value& value);

/// The Latin-1 bytes of UTF-8 `text` whose code points are all below 256 (what
/// `_codecs.encode(text, 'latin1')` gives), or nullopt when one is not.
[[nodiscard]] std::optional<std::string> latin1_bytes(std::string_view text);

}  // namespace pthload::pickle
