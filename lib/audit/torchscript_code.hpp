// What the TorchScript code in an archive calls: torch.load hands a TorchScript archive to
// torch.jit.load, which compiles the code/ records and runs the classes' __setstate__ while it
// loads; the module runs the rest when called. That code can create, map and write files
// (torch.from_file(..., shared=True); CVE-2025-32434 and the write-ups after it).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace pthload::audit {

struct CodeCalls {
  /// Every distinct name the code calls, as written: "torch.mul", "ops.prim.RaiseException",
  /// ".forward" (a method called on an expression), sorted.
  std::vector<std::string> calls;
  /// Those of `calls` that reach files, processes, shared storage or the network.
  std::vector<std::string> dangerous;
  /// Whether the code defines __setstate__, which torch.jit.load runs.
  bool defines_setstate = false;
};

/// Reads TorchScript (Python syntax) source for its calls: an identifier path followed by '(',
/// outside strings and comments, that is not a `def` or `class` name. Never throws for input.
[[nodiscard]] CodeCalls torchscript_calls(std::span<const std::byte> source);

/// The same check for a mobile archive's bytecode.pkl and other records that name operators as
/// text ("aten::from_file"): the dangerous operator names the bytes contain.
[[nodiscard]] std::vector<std::string> dangerous_operator_names(std::span<const std::byte> bytes);

}  // namespace pthload::audit
