// Turns persistent ids into storages and rebuild calls into tensors, as torch.load would
// (torch/serialization.py _load.persistent_load; torch/_utils.py _rebuild_tensor*).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pickle/value.hpp"
#include "pthload/tensor.hpp"
#include "torch/state.hpp"

namespace pthload::torch {

/// Builds the tensors a value tree describes into a CheckpointState: one Storage per key
/// (however many tensors view it), each tensor checked against its storage's bounds.
class TensorBuilder {
 public:
  /// `data_prefix` is what storage keys are appended to ("model/data/").
  TensorBuilder(detail::CheckpointState& checkpoint, std::string data_prefix);

  /// The tensor `value` rebuilds, or nullopt when `value` is no tensor (a dict, an opaque
  /// object...). The same node always gives the same tensor. Throws FormatError for a malformed
  /// rebuild call or persistent id, UnsupportedError for rebuilds not supported yet
  /// (quantized, sparse...), with the offending function named.
  [[nodiscard]] std::optional<Tensor> tensor_of(const pickle::Value& value);

 private:
  std::optional<Tensor> rebuild(const pickle::Value& callable, const pickle::Value& args);
  Tensor rebuild_dense(const pickle::Value& callable, const pickle::Value& args);
  std::shared_ptr<const Storage> storage_of(const pickle::Value& persistent);

  detail::CheckpointState& checkpoint_;
  std::string data_prefix_;
  std::unordered_map<const pickle::Value*, std::optional<Tensor>> tensors_;
  std::unordered_map<std::string, std::shared_ptr<Storage>> storages_by_key_;
  std::unordered_map<const pickle::Value*, std::shared_ptr<Storage>> storages_by_id_;
};

}  // namespace pthload::torch
