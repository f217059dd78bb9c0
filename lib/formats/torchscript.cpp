// TorchScript archives (torch.jit.save; docs/format.md §1.5;
// torch/csrc/jit/serialization/import_read.cpp readArchiveAndTensors). data.pkl is read like a
// torch.save pickle — its `__torch__.*` objects are unknown classes whose BUILD states are their
// attributes, so a module's weight is `lin.weight` — and this file adds constants.pkl.
#include "formats/torchscript.hpp"

#include <vector>

#include "common/check.hpp"
#include "pickle/machine.hpp"
#include "pthload/error.hpp"
#include "torch/naming.hpp"
#include "torch/tensor_builder.hpp"

namespace pthload::formats {

void read_torchscript_constants(internal::CheckpointState& checkpoint,
                                const zip::Entry& constants_pickle, const std::string& prefix,
                                const LoadOptions& options) {
  common::with_context({.record = constants_pickle.name}, [&] {
    auto bytes = checkpoint.archive->read(constants_pickle);
    pickle::Machine machine(options.limits);
    const pickle::Result constants = machine.run(bytes.bytes());
    // Constants name their storages by keys of their own: records `<top>/constants/<key>`.
    torch::TensorBuilder builder(checkpoint, prefix + "constants/", options.limits);
    internal::TensorList tensors;
    std::vector<OpaqueValue> opaque;
    torch::collect_named_tensors(*constants.root, constants.end_offset, builder, options.limits,
                                 tensors, opaque);
    // The root is a tuple: "0", "1"... become "CONSTANTS.c0", "CONSTANTS.c1", the names the
    // archive's own code gives them (torch/csrc/jit/serialization/python_print.cpp). A module
    // attribute may well be called `constants` (an nn.ParameterList), and its `constants.0`
    // would meet a lower-case constant's name.
    const auto constant_name = [](std::string_view name) {
      return name.empty() ? std::string("CONSTANTS") : "CONSTANTS.c" + std::string(name);
    };
    for (auto& value : opaque) {
      value.name = constant_name(value.name);
      checkpoint.opaque_values.push_back(std::move(value));
    }
    for (auto& named : tensors) {
      named.name = constant_name(named.name);
      checkpoint.tensors.push_back(std::move(named));
    }
  });
}

}  // namespace pthload::formats
