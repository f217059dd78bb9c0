// A readable, Python-like rendering of a value tree, for `pthinspect tree` and tests (literals
// follow Python's repr(); calls and state use the notation documented on print()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "pickle/value.hpp"

namespace pthload::pickle {

struct PrintOptions {
  /// Containers nested deeper than this print as `...` (the root is at depth 0).
  std::size_t max_depth = 100;
  /// Elements shown per container (entries for a dict); the rest as `... (N more)`.
  std::size_t max_items = SIZE_MAX;
  /// Bytes of a string or bytes value shown; the rest as `...` after the closing quote (the quote
  /// chosen for the bytes shown); an int's digits likewise.
  std::size_t max_string = 200;
  /// Spaces per nesting level (indentation stops growing after 100 levels).
  std::size_t indent = 2;
  /// A container whose subtree has at most this many values, and is short, prints on one line.
  std::size_t inline_values = 12;
};

/// Renders `root` as text. Scalars as Python's repr() (`None`, `True`, `12`, `1.5`, `'text'`,
/// `b'\x00'`, `bytearray(b'..')`; a Python 2 str as `'..'` when what is shown of it is UTF-8, else
/// as bytes); tuples, lists, dicts, sets and frozensets as Python writes them; a Global as
/// `module.name`; a Call as `callable(arg, ..., **kwargs)` followed by what was applied to it:
/// ` items=[..]` (APPEND), ` items={k: v}` (SETITEM), ` items={..}` (ADDITEMS), ` state=..`
/// (BUILD, also on lists, dicts and sets); a Persistent as `persistent(id)`. A container reached
/// twice is printed the first time with a label `#N=` and then as `<ref #N>`, or `<cycle #N>`
/// when reached from inside itself. Iterative: any tree prints in bounded stack space.
[[nodiscard]] std::string print(const Value& root, const PrintOptions& options = {});

/// The same, written to `out` as it is produced.
void print(std::ostream& out, const Value& root, const PrintOptions& options = {});

/// Python's str() of `key` as a dict key that names a tensor (DESIGN.md "Names of tensors"): a
/// str as it is (a Python 2 str when it is UTF-8, as torch.load decodes it), an int in decimal,
/// True/False/None, a float as Python's repr(), bytes as `b'..'` (also as protocol 2 spells
/// them, `_codecs.encode(text, 'latin1')`), and a tuple of those as
/// Python writes it (`('a', 1)`). nullopt for any other key (a tensor, an object, a frozenset,
/// whose text Python would not write the same way twice): the caller names it otherwise.
[[nodiscard]] std::optional<std::string> key_text(const Value& key);
/// key_text(key), or nullopt also when that text would be longer than `max_bytes`: decided from
/// the key's size before its text is built, so that refusing a 3 MB key costs no 3 MB copy.
[[nodiscard]] std::optional<std::string> key_text(const Value& key, std::size_t max_bytes);

}  // namespace pthload::pickle
