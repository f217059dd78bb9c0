// Names of tensors: each tensor's path from the root object (DESIGN.md "Names of tensors").
#pragma once

#include <cstddef>
#include <vector>

#include "pickle/value.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/options.hpp"
#include "pthload/tensor.hpp"
#include "torch/tensor_builder.hpp"

namespace pthload::torch {

/// Walks the tree from `root` depth-first in container order and appends every tensor with its
/// name (docs/naming.md has the rules): dict keys as text, list, tuple and set positions, the
/// arguments, keyword arguments and BUILD states of objects pthload does not interpret, joined
/// with "."; so a pickled module gives `_modules.0._parameters.weight`. A tensor reachable by
/// several paths is listed once per path; a cycle is not followed. Iterative; bounded by
/// limits.max_pickle_nesting in depth, and in steps by walk_step_budget(pickle_bytes, limits) (a
/// DAG of shared nodes can have exponentially many paths). `pickle_bytes` is the size of the
/// pickle `root` came from. Tensor-like values the builder leaves opaque go to `opaque` with
/// their reason.
///
/// Then the audit: every node reachable from `root` is visited once, whatever its kind, and a
/// tensor the walk did not list is appended under a fallback name, its path written with
/// `<arg N>`, `<state>`, `<key N>`... labels (docs/naming.md). So the tensors listed are
/// exactly the tensors the pickle rebuilds; returns how many only the audit found (0 unless a
/// naming rule has a gap). Throws what TensorBuilder throws, and FormatError(kTorchLimitExceeded)
/// past a budget above or below.
std::size_t collect_named_tensors(const pickle::Value& root, std::size_t pickle_bytes,
                                  TensorBuilder& builder, const Limits& limits,
                                  internal::TensorList& out, std::vector<OpaqueValue>& opaque);

/// Steps the naming walk may take: kWalkStepsPerPickleByte per byte of the pickle (at least
/// kMinWalkSteps), and never more than limits.max_pickle_values.
[[nodiscard]] std::size_t walk_step_budget(std::size_t pickle_bytes, const Limits& limits) noexcept;

/// A tree costs the walk one step per node and each node at least one opcode byte, so only
/// shared subtrees go past one step per byte; 8 leaves room for tied modules. Each step may
/// list a tensor (a name and a handle), so this bounds memory by the file's size as well.
inline constexpr std::size_t kWalkStepsPerPickleByte = 8;
/// Small pickles may share a little more: 65 536 steps take milliseconds and a few MB.
inline constexpr std::size_t kMinWalkSteps = 65'536;

/// What the tensor list may cost: kTensorListBytesPerPickleByte per byte of the pickle, at least
/// kMinTensorListBytes. Each tensor listed is charged its entry, its sizes and strides and its
/// name; each opaque value its entry, name and reason; each name the walk keeps for a container
/// it has yet to visit, its length. torch shares one object however often a pickle refers to it,
/// while pthload lists every path: without this a 267 KB file torch.save wrote ({64 KiB key:
/// [t] * 100 000}) made 6.5 GB of names, and 2 MB ([64-dim t] * 1 000 000) 1.2 GB of sizes.
/// Past it, FormatError(kTorchLimitExceeded). A state dict or optimizer state costs 1 to 3 bytes
/// per pickle byte.
inline constexpr std::size_t kTensorListBytesPerPickleByte = 32;
inline constexpr std::size_t kMinTensorListBytes = std::size_t{16} << 20;

/// The audit's fallback names may take this many bytes per pickle byte (at least
/// kMinFallbackNameBytes); past that a tensor it finds is named `<unreached N>`, so that many
/// tensors deep in a small file cannot cost a long name each.
inline constexpr std::size_t kFallbackNameBytesPerPickleByte = 4;
inline constexpr std::size_t kMinFallbackNameBytes = 1 << 20;

}  // namespace pthload::torch
