// The registry of globals the torch layer interprets (torch/_utils.py, torch/_tensor.py,
// torch/serialization.py find_class); every other global stays an opaque object.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "pickle/value.hpp"
#include "pthload/dtype.hpp"

namespace pthload::torch {

enum class KnownGlobal : std::uint8_t {
  kOther,                   ///< not interpreted: an opaque object
  kRebuildTensor,           ///< torch._utils._rebuild_tensor
  kRebuildTensorV2,         ///< torch._utils._rebuild_tensor_v2
  kRebuildTensorV3,         ///< torch._utils._rebuild_tensor_v3
  kRebuildParameter,        ///< torch._utils._rebuild_parameter
  kRebuildParameterState,   ///< torch._utils._rebuild_parameter_with_state
  kParameter,               ///< torch.nn.parameter.Parameter
  kRebuildFromType,         ///< torch._tensor._rebuild_from_type and _v2
  kRebuildQTensor,          ///< torch._utils._rebuild_qtensor
  kRebuildSparse,           ///< torch._utils._rebuild_sparse_tensor
  kRebuildSparseCsr,        ///< torch._utils._rebuild_sparse_csr_tensor (1.10-1.13)
  kRebuildMeta,             ///< torch._utils._rebuild_meta_tensor_no_storage
  kRebuildDeviceFromCpu,    ///< torch._utils._rebuild_device_tensor_from_cpu_tensor
  kRebuildDeviceFromNumpy,  ///< torch._utils._rebuild_device_tensor_from_numpy, and the
                            ///< _rebuild_xla_tensor and _rebuild_mlc_tensor taking the same args
  kRebuildWrapperSubclass,  ///< torch._utils._rebuild_wrapper_subclass
  kRebuildNested,           ///< torch._utils._rebuild_nested_tensor
  kOtherRebuild,            ///< another torch._utils._rebuild_*: not supported yet
  kRebuildJagged,           ///< torch.nested._internal.nested_tensor._rebuild_njt (a jagged
                            ///< nested tensor, inside _rebuild_from_type_v2)
  kNumpyReconstruct,        ///< numpy.core.multiarray._reconstruct (numpy 2: numpy._core)
  kNumpyScalar,             ///< numpy.core.multiarray.scalar (numpy 2: numpy._core)
  kNumpyDtype,              ///< numpy.dtype, and numpy >= 1.25's numpy.dtypes.<X>DType classes
  kDictLike,                ///< collections.OrderedDict, defaultdict, Counter, builtins.dict
  kSetLike,                 ///< builtins.set and builtins.frozenset (how protocols 0-3 pickle
                            ///< sets: REDUCE with a list of the members)
  kSequenceLike,            ///< builtins.list and builtins.tuple called on an iterable
  kReconstructor,           ///< copyreg._reconstructor(cls, base, state): protocols 0 and 1
                            ///< pickle objects, and subclasses of list, tuple and dict, with it
  kSize,                    ///< torch.Size
  kDtype,                   ///< torch.float32 and the other dtype attributes
  kGetLayout,               ///< torch.serialization._get_layout (a layout by its name)
  kJitListBuilder,          ///< torch.jit._pickle build_*list and restore_type_tag (TorchScript):
                            ///< the value is the first argument
};

/// What `global` (a kGlobal) is. torch.load maps the module torch.tensor to torch._tensor (files
/// from 1.8); Python 2 spellings (__builtin__) are mapped as pickle's fix_imports does.
[[nodiscard]] KnownGlobal classify_global(const pickle::Value& global) noexcept;

/// The dtype a kDtype global names (torch.float16 → float16).
[[nodiscard]] std::optional<Dtype> dtype_of_global(const pickle::Value& global) noexcept;

}  // namespace pthload::torch
