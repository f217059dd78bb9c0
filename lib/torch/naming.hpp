// Names of tensors: each tensor's path from the root object (DESIGN.md "Names of tensors").
#pragma once

#include <vector>

#include "pickle/value.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/options.hpp"
#include "pthload/tensor.hpp"
#include "torch/tensor_builder.hpp"

namespace pthload::torch {

/// Walks the tree from `root` depth-first in container order and appends every tensor with its
/// name: dict keys as text, list and tuple indices, joined with "."; an object of a class that
/// is not interpreted contributes its pickled state (its attributes), so a pickled module gives
/// `_modules.0._parameters.weight`. A tensor reachable by several paths is listed once per path;
/// a cycle is not followed. Iterative; bounded by limits.max_pickle_nesting in depth and by
/// limits.max_pickle_values in steps (a DAG of shared nodes can have exponentially many paths).
/// Tensor-like values the builder leaves opaque go to `opaque` with its reason. Throws what
/// TensorBuilder throws, and FormatError(kTorchLimitExceeded).
void collect_named_tensors(const pickle::Value& root, TensorBuilder& builder, const Limits& limits,
                           std::vector<NamedTensor>& out, std::vector<OpaqueValue>& opaque);

}  // namespace pthload::torch
