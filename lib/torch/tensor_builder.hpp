// Turns persistent ids into storages and rebuild calls into tensors, as torch.load would
// (torch/serialization.py _load.persistent_load; torch/_utils.py _rebuild_tensor*).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pickle/value.hpp"
#include "pthload/tensor.hpp"
#include "torch/legacy_storages.hpp"
#include "torch/numpy_arrays.hpp"
#include "torch/state.hpp"

namespace pthload::torch {

/// Builds the tensors a value tree describes into a CheckpointState: one Storage per key
/// (however many tensors view it), each tensor checked against its storage's bounds.
class TensorBuilder {
 public:
  /// `data_prefix` is what storage keys are appended to ("model/data/"). `limits` (the caller's,
  /// which must outlive the builder) also bound the legacy streams nested in the pickle
  /// (torch.storage._load_from_bytes).
  TensorBuilder(internal::CheckpointState& checkpoint, std::string data_prefix,
                const Limits& limits);
  /// For a legacy stream: storages come from `legacy` (which must outlive the builder).
  TensorBuilder(internal::CheckpointState& checkpoint, const LegacyStorages& legacy,
                const Limits& limits);

  /// The tensor `value` rebuilds, or nullopt when `value` is no tensor (a dict, an opaque
  /// object...). The same node always gives an equal tensor over the same Storage (a node
  /// reached twice, like tied weights, is rebuilt: cheaper than caching every node). Throws
  /// FormatError for a malformed rebuild call or persistent id, UnsupportedError for rebuilds not
  /// supported yet (quantized, sparse...), with the offending function named.
  [[nodiscard]] std::optional<Tensor> tensor_of(const pickle::Value& value);

  /// Why the last tensor_of() that returned nullopt left a tensor-like value opaque (a numpy
  /// object array...), once; nullopt when it was simply no tensor. Clears the reason.
  [[nodiscard]] std::optional<std::string> take_opaque_reason() {
    return std::exchange(opaque_reason_, std::nullopt);
  }

 private:
  std::optional<Tensor> rebuild(const pickle::Value& callable, const pickle::Value& args);
  Tensor rebuild_dense(const pickle::Value& callable, const pickle::Value& args);
  // quantized.cpp
  Tensor rebuild_quantized(const pickle::Value& function, const pickle::Value& args);
  Tensor quantizer_tensor(const pickle::Value& value, const pickle::Value& function,
                          std::string_view what);
  // sparse.cpp
  Tensor rebuild_sparse(const pickle::Value& function, const pickle::Value& args);
  Tensor sparse_part(const pickle::Value& value, const pickle::Value& function,
                     std::string_view what);
  // storageless.cpp: meta tensors and tensors of storage-less backends
  Tensor rebuild_meta(const pickle::Value& function, const pickle::Value& args);
  Tensor rebuild_device_from_cpu(const pickle::Value& function, const pickle::Value& args);
  Tensor rebuild_wrapper_subclass(const pickle::Value& function, const pickle::Value& args);
  // nested.cpp: _rebuild_nested_tensor
  Tensor rebuild_nested(const pickle::Value& function, const pickle::Value& args);
  StorageRef storage_of(const pickle::Value& persistent);
  // numpy_tensors.cpp: tensors whose bytes are in the pickle (numpy arrays)
  std::optional<Tensor> numpy_tensor(const pickle::Value& value);
  Tensor rebuild_device_from_numpy(const pickle::Value& function, const pickle::Value& args);
  internal::FileRange pickled_bytes(const NumpyArray& array);
  std::shared_ptr<Storage> pickled_storage(Dtype dtype, internal::FileRange range, bool big_endian,
                                           std::string location, bool follows_map_location);

  internal::CheckpointState& checkpoint_;
  const Limits& limits_;
  std::string data_prefix_;
  const LegacyStorages* legacy_ = nullptr;
  // torch.storage._load_from_bytes calls already read, by load_from_bytes_key().
  std::unordered_map<const pickle::Value*, StorageRef> nested_storages_;
  // Indexed like the archive's entries: a key names exactly one record, which must be looked up
  // anyway, so its index finds the storage without hashing the key again.
  std::vector<std::shared_ptr<Storage>> storage_by_record_;
  // Tensors over pickled bytes, by their node (or their rebuild's args), so a node reached twice
  // gives the same storage; copies of pickled bytes by the node fixing them.
  std::unordered_map<const pickle::Value*, Tensor> pickled_tensors_;
  std::unordered_map<const pickle::Value*, std::shared_ptr<const common::MappedFile>>
      pickled_copies_;
  std::unordered_map<const pickle::Value*, std::shared_ptr<const common::MappedFile>>
      converted_copies_;
  std::size_t pickled_storage_count_ = 0;
  std::optional<std::string> opaque_reason_;
  std::vector<std::int64_t> sizes_scratch_;
  std::vector<std::int64_t> strides_scratch_;
  std::string record_name_scratch_;
};

}  // namespace pthload::torch
