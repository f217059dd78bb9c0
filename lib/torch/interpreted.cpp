// Which pickle globals pthload gives a meaning to (interpreted.hpp).
#include "torch/interpreted.hpp"

#include <string_view>

#include "torch/globals.hpp"
#include "torch/storage_types.hpp"

namespace pthload {
namespace {

bool is_python_builtin(std::string_view module) {
  return module == "builtins" || module == "__builtin__";
}

}  // namespace

// What the torch and pickle layers give a meaning to without calling anything. Kept beside the
// layers' own checks (globals.cpp, storage_types.cpp, codecs.cpp, the rebuild_*.cpp files,
// legacy_storages.cpp): a global listed here and not there would be reported
// as understood while the loader keeps it opaque, which the fixture tests would show.
bool torch::is_interpreted(const pickle::Value& global) {
  if (torch::classify_global(global) != torch::KnownGlobal::kOther) return true;
  const std::string_view module = global.module();
  const std::string_view name = global.name();
  // Storage classes are matched by name whatever the module, as torch.load does.
  if (torch::storage_type_dtype(name)) return true;
  if (module == "torch") {
    return name == "device" || name == "per_tensor_affine" || name == "per_channel_affine" ||
           name == "per_channel_affine_float_qparams" || name == "strided" ||
           name.starts_with("sparse_");
  }
  if (module == "torch.storage") return name == "_load_from_bytes";
  // The class numpy's _reconstruct is called with; the array is read from its BUILD state.
  if (module == "numpy") return name == "ndarray";
  if (module == "_codecs") return name == "encode";
  if (is_python_builtin(module)) {
    return name == "set" || name == "frozenset" || name == "bytearray" || name == "bytes";
  }
  // TorchScript's classes: objects whose attributes are read; their code is never run.
  return module.starts_with("__torch__");
}

}  // namespace pthload
