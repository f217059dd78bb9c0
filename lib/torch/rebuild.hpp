// The rebuild functions of torch.load, one file per family of tensors, and the state they share
// while one pickle's tensors are built (torch/_utils.py _rebuild_*; docs/format.md §3).
// tensor_builder.cpp dispatches a call to its family:
//   rebuild_dense.cpp      _rebuild_tensor(_v2, _v3), Parameter, meta tensors, device tensors
//                          saved through a CPU copy
//   rebuild_quantized.cpp  _rebuild_qtensor
//   rebuild_sparse.cpp     _rebuild_sparse_tensor, _rebuild_sparse_csr_tensor
//   rebuild_nested.cpp     _rebuild_nested_tensor
//   rebuild_numpy.cpp      numpy arrays and scalars in the pickle,
//   _rebuild_device_tensor_from_numpy rebuild_subclass.cpp   _rebuild_from_type_v2,
//   _rebuild_wrapper_subclass
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "checkpoint/state.hpp"
#include "common/mapped_file.hpp"
#include "pickle/value.hpp"
#include "pthload/tensor.hpp"
#include "torch/globals.hpp"
#include "torch/prebuilt_tensors.hpp"
#include "torch/spelled_bytes.hpp"
#include "torch/storage_resolver.hpp"

namespace pthload::torch {

/// Bytes by where they lie and how many they are. The pickle's input and the decoded copies
/// outlive the context, so equal keys are the same bytes.
using ByteRun = std::pair<const std::byte*, std::size_t>;

/// Tensors whose bytes the pickle holds (numpy arrays), kept by node so that a node reached twice
/// gives the same storage, and what is made of their bytes once however many arrays share them:
/// text decoded (by spelling), copies (by bytes), bfloat16 conversions (by bytes and byte order).
struct PickledTensors {
  std::unordered_map<const pickle::Value*, Tensor> by_node;
  SpelledBytes spelled;
  std::map<ByteRun, std::shared_ptr<const common::MappedFile>> copies;
  /// Keyed also by the float32 elements' byte order: arrays may share bytes yet read them in
  /// either.
  std::map<std::pair<ByteRun, bool>, std::shared_ptr<const common::MappedFile>> converted;
  std::size_t storage_count = 0;  ///< numbers their storages' keys ("<numpy 3>")
  /// One storage for the arrays whose bytes are one run read alike (the run's file, offset and
  /// size, the dtype, the byte order, the device tag, whether map_location moves it): a pickle
  /// may spell one array's bytes for thousands of arrays, and a copy load would otherwise copy
  /// them once per array. numpy's own pickles give every array bytes of its own.
  std::map<std::tuple<const void*, std::uint64_t, std::uint64_t, Dtype, bool, std::string, bool>,
           std::shared_ptr<Storage>>
      storages;
};

/// What the rebuild functions share while the tensors of one pickle are built. Every function
/// below reads and writes it; none keeps a pointer to it.
struct RebuildContext {
  internal::CheckpointState& checkpoint;
  StorageResolver storages;
  PickledTensors pickled{};
  /// Why the last value that looked like a tensor was left opaque (TensorBuilder hands it out).
  std::optional<std::string> opaque_reason{};
  /// The sizes and strides being read: reused, so the hot path (100 000 small tensors) allocates
  /// nothing for them. A function that rebuilds tensors of its arguments in between copies them.
  std::vector<std::int64_t> sizes_scratch{};
  std::vector<std::int64_t> strides_scratch{};
  /// The last callable tensor_of classified, and what it is: the calls of a pickle name their
  /// function through one memoized global, so most lookups are this one comparison. (The values
  /// tensor_of is given are the pickle's, which outlive the context: an address is not reused.)
  const pickle::Value* last_callable = nullptr;
  KnownGlobal last_kind = KnownGlobal::kOther;
  /// Dense tensors rebuilt while the pickle ran (prebuilt_tensors.hpp), which tensor_of takes
  /// instead of rebuilding them; null when there are none.
  PrebuiltTensors* prebuilt = nullptr;
  /// How many rebuild calls are being rebuilt, one inside another's arguments (bounded by
  /// kMaxRebuildNesting).
  std::size_t rebuild_depth = 0;
};

/// How deeply rebuild calls may nest. torch nests a few (a Parameter around a subclass around a
/// quantized tensor whose scales are tensors), and each level is a recursion of the dispatch:
/// without a bound, 10 000 nested _rebuild_from_type_v2 calls (within the pickle's nesting
/// limit) overflow a 2 MiB thread stack.
inline constexpr std::size_t kMaxRebuildNesting = 32;

// ---- the dispatch (tensor_builder.cpp), which the families call for their arguments' tensors
/// The tensor `value` rebuilds, or nullopt when it is no tensor (see TensorBuilder::tensor_of).
[[nodiscard]] std::optional<Tensor> tensor_of(RebuildContext& context, const pickle::Value& value);
/// The tensor the call `function(*args)` rebuilds, or nullopt when `function` makes no tensor.
[[nodiscard]] std::optional<Tensor> rebuild(RebuildContext& context, const pickle::Value& function,
                                            const pickle::Value& args);

// ---- rebuild_dense.cpp
/// `kind`: classify_global(function), one of kRebuildTensor, kRebuildTensorV2, kRebuildTensorV3.
[[nodiscard]] Tensor rebuild_dense(RebuildContext& context, KnownGlobal kind,
                                   const pickle::Value& function, const pickle::Value& args);
[[nodiscard]] Tensor rebuild_parameter(RebuildContext& context, const pickle::Value& function,
                                       const pickle::Value& args);
[[nodiscard]] Tensor rebuild_meta(const pickle::Value& function, const pickle::Value& args);
[[nodiscard]] Tensor rebuild_device_from_cpu(RebuildContext& context, const pickle::Value& function,
                                             const pickle::Value& args);
/// The tensor an argument of `function` holds, which must be dense (a storage, no quantizer):
/// sparse parts, nested inputs, a device tensor's CPU data. Throws
/// FormatError(kTorchBadRebuildArguments) naming `what`.
[[nodiscard]] Tensor dense_argument(RebuildContext& context, const pickle::Value& value,
                                    const pickle::Value& function, std::string_view what);

// ---- rebuild_quantized.cpp
[[nodiscard]] Tensor rebuild_quantized(RebuildContext& context, const pickle::Value& function,
                                       const pickle::Value& args);

// ---- rebuild_sparse.cpp
[[nodiscard]] Tensor rebuild_sparse(RebuildContext& context, const pickle::Value& function,
                                    const pickle::Value& args);

// ---- rebuild_nested.cpp
[[nodiscard]] Tensor rebuild_nested(RebuildContext& context, const pickle::Value& function,
                                    const pickle::Value& args);

// ---- rebuild_numpy.cpp
/// The tensor a numpy array or scalar (is_numpy_value) holds, or nullopt with
/// `context.opaque_reason` set when it is none pthload can show (an object array...).
[[nodiscard]] std::optional<Tensor> numpy_tensor(RebuildContext& context,
                                                 const pickle::Value& value);
[[nodiscard]] Tensor rebuild_device_from_numpy(RebuildContext& context,
                                               const pickle::Value& function,
                                               const pickle::Value& args);

// ---- rebuild_subclass.cpp
/// nullopt for a jagged nested tensor, which has no tensor of its own.
[[nodiscard]] std::optional<Tensor> rebuild_from_type(RebuildContext& context,
                                                      const pickle::Value& function,
                                                      const pickle::Value& args);
[[nodiscard]] Tensor rebuild_wrapper_subclass(const pickle::Value& function,
                                              const pickle::Value& args);

}  // namespace pthload::torch
