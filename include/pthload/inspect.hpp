// Auditing a checkpoint: its object tree as text and the Python globals its pickle names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/export.hpp"

namespace pthload {

/// How much of the object tree object_tree() shows.
struct TreeOptions {
  /// Containers nested deeper than this print as `...` (the root is at depth 0).
  std::size_t max_depth = 100;
  /// Elements shown per container; the rest as `... (N more)`.
  std::size_t max_items = SIZE_MAX;
  /// Bytes of a string or bytes value shown.
  std::size_t max_string = 200;
};

/// The checkpoint's main pickle (data.pkl, or a legacy stream's main pickle) as Python-like
/// text, exactly as it was pickled: rebuild calls, persistent ids and every unknown global's
/// call with its arguments and state, so nothing the file asks for is hidden. Nothing is run.
/// A value reached twice prints once, then as `<ref #N>` (`<cycle #N>` from inside itself).
/// Empty for a file without a pickle (safetensors).
[[nodiscard]] PTHLOAD_API std::string object_tree(const Checkpoint& checkpoint,
                                                  const TreeOptions& options = {});
/// The same text written to `out` as it is made, in pieces of a few KiB: a pickle of millions
/// of values prints without its whole text in memory.
PTHLOAD_API void object_tree(std::ostream& out, const Checkpoint& checkpoint,
                             const TreeOptions& options = {});

/// A Python global (module.name) the pickle names.
struct GlobalReference {
  std::string module;
  std::string name;
  /// pthload knows what it means (a torch rebuild function, OrderedDict, torch.Size, a dtype,
  /// ...). Otherwise it is opaque: kept in the tree with its arguments, never called, and
  /// Python's torch.load would import and call it (torch.load(weights_only=True) refuses it).
  bool interpreted = false;
};

/// Every distinct global named by the main pickle, sorted by module then name; none for a file
/// without a pickle (safetensors).
[[nodiscard]] PTHLOAD_API std::vector<GlobalReference> referenced_globals(
    const Checkpoint& checkpoint);

/// How safe scan() judges a file to load with Python's torch.load, from best to worst.
enum class Verdict : std::uint8_t {
  kSafe,       ///< only what torch.load(weights_only=True) allows, and nothing unusual
  kUnknown,    ///< globals pthload keeps opaque (a pickled nn.Module, argparse.Namespace...) or
               ///< something torch never writes: torch.load would import and call code, which
               ///< code is not known to be harmful
  kDangerous,  ///< globals that run commands, code, or reach files and the network (os.system,
               ///< builtins.eval, subprocess, ...), or a structure made to mislead scanners
  kNotACheckpoint,  ///< not a zip checkpoint, legacy stream or pickle at all
};
/// "safe", "unknown", "dangerous", "not a checkpoint". The view is static.
[[nodiscard]] PTHLOAD_API std::string_view verdict_name(Verdict verdict) noexcept;

/// A global one of the file's pickles names, as the pickle machine built it (GLOBAL, INST, or
/// STACK_GLOBAL from strings however they got there: literals, memo entries), whether or not
/// the pickle's result still refers to it.
struct ScannedGlobal {
  std::string module;
  std::string name;
  Verdict verdict = Verdict::kSafe;  ///< kSafe, kUnknown or kDangerous
  /// Whether the pickle calls it (REDUCE, NEWOBJ, INST, OBJ), not only imports it.
  bool called = false;
  /// The pickle it is in: "archive/data.pkl", "stream pickle 4", "... > nested pickle".
  std::string where;
};

/// Something in the file torch.save never writes: a reason for a worse verdict.
struct ScanFinding {
  Verdict severity = Verdict::kUnknown;
  /// The record or pickle, with the byte offset where it applies ("archive/data.pkl+0x1a2").
  std::string where;
  std::string message;
};

/// What scan() found in one file.
struct ScanReport {
  /// The worst of the globals' verdicts and the findings' severities.
  Verdict verdict = Verdict::kSafe;
  /// "zip", "torchscript", "legacy", "pickle" (a bare pickle stream), "safetensors" (data
  /// only: always safe), or "" when not a checkpoint.
  std::string format;
  /// Every distinct (module, name, where), sorted.
  std::vector<ScannedGlobal> globals;
  std::vector<ScanFinding> findings;
  /// How often each opcode occurs over every pickle scanned, by opcode name, sorted by name.
  std::vector<std::pair<std::string, std::uint64_t>> opcodes;
};

/// Judges whether loading the file at `path` with Python's torch.load would import or call
/// anything beyond what torch's weights-only loader allows, from the state pthload's pickle
/// machine reaches (never by running anything): every pickle record of a zip checkpoint (a
/// TorchScript archive's too), every pickle of a legacy stream, a bare pickle, and the pickles
/// nested in them (bytes handed to torch.storage._load_from_bytes or pickle.loads). Also
/// reports what torch.save never writes: code records outside a TorchScript archive, bytes
/// after STOP, more than one pickle where torch writes one, opcodes torch never writes, and zip
/// records whose local headers disagree with the central directory or overlap (dangerous: they
/// make scanners and loaders see different files). A malformed pickle is reported as a finding
/// with what was read before the error, since Python runs a pickle up to its error. Throws
/// IoError when the file cannot be read; every problem of its content is in the report.
[[nodiscard]] PTHLOAD_API ScanReport scan(const std::filesystem::path& path,
                                          const LoadOptions& options = {});

/// One problem verify_records() found in a record.
struct RecordProblem {
  std::string record;
  std::string message;  ///< the error's what(): file, record, offset and what is wrong
};

/// Reads every record of the zip checkpoint at `path` once and checks its CRC-32 (inflating
/// deflated ones), calling `progress` with the bytes of each record read. Returns one problem
/// per record that fails (all are checked). Throws as list_records() for an archive that
/// cannot be parsed at all.
[[nodiscard]] PTHLOAD_API std::vector<RecordProblem> verify_records(
    const std::filesystem::path& path, const std::function<void(std::uint64_t)>& progress = {},
    const LoadOptions& options = {});

}  // namespace pthload
