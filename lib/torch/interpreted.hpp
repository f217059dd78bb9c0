// Which pickle globals pthload gives a meaning to: shared by referenced_globals() and scan().
#pragma once

#include "pickle/value.hpp"

namespace pthload::torch {

/// Whether pthload interprets `global` (a kGlobal): torch's rebuild functions and storage
/// classes, OrderedDict, torch.Size, dtypes, devices, numpy's array rebuild, _codecs.encode,
/// set/frozenset/bytearray/bytes, and TorchScript's `__torch__` classes. Everything else stays
/// an opaque object.
[[nodiscard]] bool is_interpreted(const pickle::Value& global);

}  // namespace pthload::torch
