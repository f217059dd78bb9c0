// Auditing a checkpoint: its object tree as text and the Python globals its pickle names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/export.hpp"

namespace pthload {

/// How much of the object tree object_tree() shows.
struct TreeOptions {
  /// Containers nested deeper than this print as `...` (the root is at depth 0).
  std::size_t max_depth = 100;
  /// Elements shown per container; the rest as `... (N more)`.
  std::size_t max_items = SIZE_MAX;
  /// Bytes of a string or bytes value shown.
  std::size_t max_string = 200;
};

/// The checkpoint's main pickle (data.pkl, or a legacy stream's main pickle) as Python-like
/// text, exactly as it was pickled: rebuild calls, persistent ids and every unknown global's
/// call with its arguments and state, so nothing the file asks for is hidden. Nothing is run.
/// A value reached twice prints once, then as `<ref #N>` (`<cycle #N>` from inside itself).
/// Empty for a file without a pickle (safetensors). Returns the caller's string. Throws
/// std::bad_alloc only: the tree was read when the checkpoint was opened.
[[nodiscard]] PTHLOAD_API std::string object_tree(const Checkpoint& checkpoint,
                                                  const TreeOptions& options = {});
/// The same text written to `out` as it is made, in pieces of a few KiB: a pickle of millions
/// of values prints without its whole text in memory. Throws what writing to `out` throws
/// (with the stream's exceptions enabled), and std::bad_alloc.
PTHLOAD_API void object_tree(std::ostream& out, const Checkpoint& checkpoint,
                             const TreeOptions& options = {});

/// A Python global (module.name) the pickle names.
struct GlobalReference {
  std::string module;  ///< "collections", "torch._utils"
  std::string name;    ///< "OrderedDict", "_rebuild_tensor_v2"
  /// pthload knows what it means (a torch rebuild function, OrderedDict, torch.Size, a dtype,
  /// ...). Otherwise it is opaque: kept in the tree with its arguments, never called, and
  /// Python's torch.load would import and call it (torch.load(weights_only=True) refuses it).
  bool interpreted = false;
};

/// Every distinct global named by the main pickle, sorted by module then name; none for a file
/// without a pickle (safetensors). Returns the caller's vector. Throws std::bad_alloc.
[[nodiscard]] PTHLOAD_API std::vector<GlobalReference> referenced_globals(
    const Checkpoint& checkpoint);

}  // namespace pthload
