// How scan() judges one Python global a pickle names: safe only by exact name on torch's
// weights-only allow list, dangerous by what Python would resolve the name to (deny lists of
// picklescan, modelscan and fickling; dotted names walked as find_class walks them), unknown
// otherwise.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "pthload/scan.hpp"

namespace pthload::audit {

/// What one global is judged to be, and why when it is not safe.
struct GlobalJudgement {
  Verdict verdict = Verdict::kUnknown;
  std::string reason;  ///< empty for kSafe
};

/// Judges `module`.`name` as a GLOBAL, INST or STACK_GLOBAL names it. kSafe exactly when the pair,
/// after Python's fix_imports renames, is one torch's weights-only unpickler allows (compared
/// whole: no prefix, no dotted path). kDangerous when Python's find_class could resolve it to
/// something that runs commands or code, reaches files, processes or the network, or unpickles
/// more: a deny-listed module or name, also when reached through attributes (`pathlib` +
/// `os.system`) or through dunder attributes (`__builtins__`, `__globals__`, `__subclasses__`).
/// kUnknown otherwise, with the reason.
[[nodiscard]] GlobalJudgement judge_global(std::string_view module, std::string_view name);

/// Whether torch's weights-only unpickler allows the GLOBAL `module`.`name`: the full path
/// module + "." + name, after torch's own renames, is on its allow list and the module is not
/// one it blocks. (A dotted name whose full path is allowed passes, as it does in torch.)
[[nodiscard]] bool weights_only_allows(std::string_view module, std::string_view name);

/// What an allowed global's value is, from torch's allow list.
enum class AllowedKind : unsigned char {
  kClass,     ///< NEWOBJ and REDUCE make an instance of it
  kFunction,  ///< REDUCE calls it
  kConstant,  ///< a dtype, quantization scheme or storage type: REDUCE cannot call it
};

/// The entry of torch's weights-only allow list for the full path `module`.`name` (after torch's
/// renames), or nullptr.
struct AllowedGlobal {
  std::string_view module;
  std::string_view name;
  AllowedKind kind;
};
[[nodiscard]] const AllowedGlobal* weights_only_entry(std::string_view module,
                                                      std::string_view name);

/// torch's whole weights-only allow list, in a fixed order: an entry's index names it compactly.
[[nodiscard]] std::span<const AllowedGlobal> weights_only_table() noexcept;

/// The torch version whose weights-only rules these tables hold ("2.15.0").
[[nodiscard]] std::string_view weights_only_torch_version() noexcept;

/// Whether calling the value a call of this global returns is the expected use of it (the
/// callable builders functools.partial and operator's getters): then the call of the call is
/// what makes it dangerous, not the global itself.
[[nodiscard]] bool builds_callables(std::string_view module, std::string_view name);

}  // namespace pthload::audit
