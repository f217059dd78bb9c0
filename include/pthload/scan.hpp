// Judging a file before anyone loads it: can torch.load (or another pickle loader) run code
// from it, and does torch.load(weights_only=True) accept it? pthinspect's `scan`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pthload/export.hpp"
#include "pthload/limits.hpp"

namespace pthload {

/// scan()'s verdict: can loading the file run code? From best to worst, "not a checkpoint" apart.
enum class Verdict : std::uint8_t {
  kSafe,       ///< proved harmless: every global it names is, by exact name, one that
               ///< torch.load(weights_only=True) allows; every call and BUILD is one that loader
               ///< accepts and it accepts the file; CPython's unpickler and pthload read the same
               ///< opcodes; and it holds nothing else a loader runs (code, extra pickles).
               ///< A safetensors file, which holds no pickle, is safe whatever its name
  kUnknown,    ///< not proved harmless: a global off the allow list (a pickled nn.Module class,
               ///< a defaultdict, a numpy array), an opcode or layout torch.load(weights_only=
               ///< True) refuses, bytes CPython could read otherwise, TorchScript code, a pickle
               ///< pthload cannot read to its end, a record it cannot read
  kDangerous,  ///< something that runs commands or code, reaches files, processes or the network,
               ///< or unpickles more: a deny-listed global (also through dotted names), a call of
               ///< a callable built while unpickling, a BUILD on a class or module, TorchScript
               ///< code that reaches files, or a structure made to mislead scanners
  kNotACheckpoint,  ///< holds no pickle any loader would run (and nothing dangerous)
};
/// "safe", "unknown", "dangerous", "not a checkpoint". The view is static.
[[nodiscard]] PTHLOAD_API std::string_view verdict_name(Verdict verdict) noexcept;

/// A global one of the file's pickles names, as the pickle machine built it (GLOBAL, INST, or
/// STACK_GLOBAL from strings however they got there: literals, memo entries), whether or not
/// the pickle's result still refers to it.
struct ScannedGlobal {
  std::string module;  ///< as the pickle spells it ("posix", "torch._utils")
  std::string name;    ///< as the pickle spells it, dotted names kept ("system", "a.b")
  Verdict verdict = Verdict::kSafe;  ///< kSafe, kUnknown or kDangerous
  /// Whether the pickle calls it (REDUCE, NEWOBJ, INST, OBJ, or through a function that calls
  /// its argument), not only imports it.
  bool called = false;
  /// The pickle it is in: "archive/data.pkl", "stream pickle 4", "... > nested pickle".
  std::string where;
  /// Why it is not safe ("on the deny list", "not on torch 2.15's weights-only allow list..."),
  /// empty when it is.
  std::string reason;
};

/// Something that bears on the verdict beyond the globals: what torch.save never writes, where
/// readers could disagree, code.
struct ScanFinding {
  Verdict severity = Verdict::kUnknown;
  /// The record or pickle, with the byte offset where it applies ("archive/data.pkl+0x1a2").
  std::string where;
  std::string message;  ///< for people: what was found and why it matters
};

/// Whether torch.load(weights_only=True) (torch's default since 2.6) accepts the file, by the
/// rules of torch's weights-only unpickler in the version named: its opcodes, its allow list,
/// its checks on calls, BUILD, SETITEM(S), APPEND(S) and persistent ids; and torch.load's
/// handling of the format (TorchScript archives and tar files refused; a path ending in
/// .safetensors handed to safetensors). Storage records are not read: a file whose pickle is
/// accepted but whose tensor data is missing or short fails in torch.load all the same.
struct WeightsOnlyAnswer {
  bool accepted = false;
  /// The torch version whose rules were applied ("2.15.0").
  std::string torch_version;
  /// Why not, as torch would say it ("Unsupported operand 149"), with where.
  std::string reason;
  std::string where;
};

/// What scan() found in one file.
struct ScanReport {
  /// The worst of the globals' verdicts and the findings' severities; kUnknown at least when
  /// the weights-only loader refuses the file; kNotACheckpoint only when nothing else is found.
  Verdict verdict = Verdict::kSafe;
  /// "zip", "torchscript", "legacy", "pickle" (a bare pickle stream), "tar" (torch 0.1.x),
  /// "safetensors" (data only), or "" when not a checkpoint.
  std::string format;
  /// The second answer, apart from the verdict.
  WeightsOnlyAnswer weights_only;
  /// Every distinct (module, name, where), sorted.
  std::vector<ScannedGlobal> globals;
  std::vector<ScanFinding> findings;
  /// What the TorchScript code (code/ records) calls, every distinct name, sorted: "torch.mul",
  /// "ops.prim.RaiseException", ".forward" (a method called on an expression).
  std::vector<std::string> code_calls;
  /// How often each opcode occurs over every pickle scanned, by opcode name, sorted by name.
  std::vector<std::pair<std::string, std::uint64_t>> opcodes;
};

/// Judges what loading the file at `path` with Python's torch.load (or another pickle loader)
/// could run, from the state pthload's pickle machine reaches (never by running anything): every
/// pickle-bearing record of a zip whatever its layout (a TorchScript archive's too, and its code),
/// every pickle of a legacy stream, a bare pickle, the pickle members of a torch 0.1.x tar file,
/// and the pickles nested in them (bytes handed to torch.storage._load_from_bytes or
/// pickle.loads); each also as CPython's C unpickler reads its frames where that differs. Also
/// reports what torch.save never writes: code records outside a TorchScript archive, bytes after
/// STOP, more than one pickle where torch writes one, opcodes torch never writes, and zip records
/// whose local headers disagree with the central directory or overlap (dangerous: they make
/// scanners and loaders see different files). A malformed pickle is judged up to its error,
/// since Python runs a pickle up to its error, and past it by a linear reading of the names it
/// holds. Gives, apart, whether torch.load(weights_only=True) accepts the file. `limits` bound
/// the zip index and the pickle machine as for a load; a file past them is judged kUnknown with
/// a finding that says so. Returns the report by value (the caller owns it). Throws IoError
/// when the file cannot be opened or mapped, std::bad_alloc; every problem of its content is in
/// the report.
[[nodiscard]] PTHLOAD_API ScanReport scan(const std::filesystem::path& path,
                                          const Limits& limits = {});

}  // namespace pthload
