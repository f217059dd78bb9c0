// Which globals mean what (torch/_utils.py rebuild functions; torch/serialization.py
// load_module_mapping; Lib/_compat_pickle.py for Python 2 module names).
#include "torch/globals.hpp"

namespace pthload::torch {
namespace {

std::string_view canonical_module(std::string_view module) noexcept {
  if (module == "torch.tensor") return "torch._tensor";
  if (module == "__builtin__") return "builtins";
  if (module == "copy_reg") return "copyreg";
  return module;
}

}  // namespace

KnownGlobal classify_global(const pickle::Value& global) noexcept {
  if (!global.is(pickle::Kind::kGlobal)) return KnownGlobal::kOther;
  const std::string_view module = canonical_module(global.module());
  const std::string_view name = global.name();
  if (module == "torch._utils") {
    if (name == "_rebuild_tensor") return KnownGlobal::kRebuildTensor;
    if (name == "_rebuild_tensor_v2") return KnownGlobal::kRebuildTensorV2;
    if (name == "_rebuild_tensor_v3") return KnownGlobal::kRebuildTensorV3;
    if (name == "_rebuild_parameter") return KnownGlobal::kRebuildParameter;
    if (name == "_rebuild_parameter_with_state") return KnownGlobal::kRebuildParameterState;
    if (name == "_rebuild_qtensor") return KnownGlobal::kRebuildQTensor;
    if (name == "_rebuild_sparse_tensor") return KnownGlobal::kRebuildSparse;
    if (name == "_rebuild_sparse_csr_tensor") return KnownGlobal::kRebuildSparseCsr;
    if (name == "_rebuild_meta_tensor_no_storage") return KnownGlobal::kRebuildMeta;
    if (name == "_rebuild_device_tensor_from_cpu_tensor") return KnownGlobal::kRebuildDeviceFromCpu;
    if (name == "_rebuild_device_tensor_from_numpy" || name == "_rebuild_xla_tensor" ||
        name == "_rebuild_mlc_tensor") {
      return KnownGlobal::kRebuildDeviceFromNumpy;
    }
    if (name == "_rebuild_wrapper_subclass") return KnownGlobal::kRebuildWrapperSubclass;
    if (name == "_rebuild_nested_tensor") return KnownGlobal::kRebuildNested;
    if (name.starts_with("_rebuild_")) return KnownGlobal::kOtherRebuild;
    return KnownGlobal::kOther;
  }
  if (module == "torch._tensor" &&
      (name == "_rebuild_from_type_v2" || name == "_rebuild_from_type")) {
    return KnownGlobal::kRebuildFromType;
  }
  if (module == "torch.nn.parameter" && name == "Parameter") return KnownGlobal::kParameter;
  if (module == "torch.nested._internal.nested_tensor" && name == "_rebuild_njt") {
    return KnownGlobal::kRebuildJagged;
  }
  if (module == "collections" &&
      (name == "OrderedDict" || name == "defaultdict" || name == "Counter")) {
    return KnownGlobal::kDictLike;
  }
  if (module == "builtins" && name == "dict") return KnownGlobal::kDictLike;
  if (module == "builtins" && (name == "set" || name == "frozenset")) return KnownGlobal::kSetLike;
  if (module == "builtins" && (name == "list" || name == "tuple")) {
    return KnownGlobal::kSequenceLike;
  }
  if (module == "copyreg" && name == "_reconstructor") return KnownGlobal::kReconstructor;
  if (module == "torch" && name == "Size") return KnownGlobal::kSize;
  if (module == "torch.serialization" && name == "_get_layout") return KnownGlobal::kGetLayout;
  // TorchScript's pickler wraps typed lists as build_intlist([...]) and so on, and annotates
  // values as restore_type_tag(value, 'List[Tensor]') (torch/jit/_pickle.py).
  if (module == "torch.jit._pickle" &&
      (name == "build_intlist" || name == "build_tensorlist" || name == "build_doublelist" ||
       name == "build_boollist" || name == "restore_type_tag")) {
    return KnownGlobal::kJitListBuilder;
  }
  if (module == "torch" && dtype_from_name(name)) return KnownGlobal::kDtype;
  // numpy 2 renamed numpy.core to numpy._core (docs/format.md §3, numpy bullet).
  if (module == "numpy.core.multiarray" || module == "numpy._core.multiarray") {
    if (name == "_reconstruct") return KnownGlobal::kNumpyReconstruct;
    if (name == "scalar") return KnownGlobal::kNumpyScalar;
  }
  if ((module == "numpy" && name == "dtype") ||
      (module == "numpy.dtypes" && name.ends_with("DType"))) {
    return KnownGlobal::kNumpyDtype;
  }
  return KnownGlobal::kOther;
}

std::optional<Dtype> dtype_of_global(const pickle::Value& global) noexcept {
  if (!global.is(pickle::Kind::kGlobal) || global.module() != "torch") return std::nullopt;
  return dtype_from_name(global.name());
}

}  // namespace pthload::torch
