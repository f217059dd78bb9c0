// The pickle half of scan(): runs each pickle a file holds through pthload's pickle machine (and,
// where CPython would read it otherwise, CPython's reading of it too) and judges every global it
// names and every call and BUILD it makes. The formats (zip, tar, stream) are lib/audit/scan.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>

#include "audit/global_rules.hpp"
#include "pickle/value.hpp"
#include "pthload/options.hpp"
#include "pthload/scan.hpp"

namespace pthload::audit {

struct CPythonReading;

/// "where+0x1a2".
[[nodiscard]] std::string at(std::string_view where, std::uint64_t offset);

class Scanner {
 public:
  Scanner(ScanReport& report, const LoadOptions& options) : report_(report), options_(options) {}

  void finding(Verdict severity, std::string where, std::string message);

  /// Judges the pickle at the start of `bytes`, named `where` in findings. Returns where it ends
  /// (past STOP) as pthload reads it, or as a linear reading does when the machine refuses it;
  /// nullopt when no STOP can be found. `on_root`, when given, sees the root value.
  std::optional<std::size_t> scan_pickle(
      std::span<const std::byte> bytes, const std::string& where, int depth,
      const std::function<void(const pickle::Value&)>& on_root = {});

  /// Stacked pickles from the start of `bytes` (torch's legacy stream, or a bare pickle).
  /// Returns "legacy" when the first pickle is torch's magic number, "pickle" when it is some
  /// other pickle, "" when the bytes hold no pickle that could run anything.
  /// `torch_reads_it`: whether torch.load would read these bytes as a stream (not for a tar
  /// header that is a pickle too), for the findings' words.
  std::string scan_stream(std::span<const std::byte> bytes, const std::string& where, int depth,
                          bool torch_reads_it = true);

  /// Whether a pickle was judged (one a loader would run), for "not a checkpoint".
  [[nodiscard]] bool saw_pickle() const noexcept { return saw_pickle_; }
  void note_pickle() noexcept { saw_pickle_ = true; }

  /// Moves the globals and opcode counts into the report and sets its verdict from them, the
  /// findings and the weights-only answer.
  void finish();

 private:
  void add_global(std::string_view module, std::string_view name, bool called,
                  const std::string& where);
  void on_call(const pickle::Value& call, const std::string& where);
  // `reading`: where `bytes` is CPython's reading of a pickle (frames joined), to say offsets
  // in the input, not in `bytes`; nullptr where `bytes` is the input.
  void scan_machine(std::span<const std::byte> bytes, const std::string& where, int depth,
                    const std::function<void(const pickle::Value&)>& on_root,
                    std::optional<std::size_t>& end, std::optional<std::size_t>& failed_at,
                    const CPythonReading* reading = nullptr);
  void scan_linear_names(std::span<const std::byte> bytes, std::size_t from,
                         const std::string& where, const CPythonReading* reading = nullptr);
  [[nodiscard]] static bool is_legacy_magic(std::span<const std::byte> pickle_bytes);

  ScanReport& report_;
  const LoadOptions& options_;
  bool saw_pickle_ = false;
  bool last_pickle_read_ = false;  // whether the machine read the latest pickle to its STOP
  std::map<std::tuple<std::string, std::string, std::string>, ScannedGlobal> globals_;
  std::map<std::pair<std::string, std::string>, GlobalJudgement> judgements_;
  std::map<std::string, std::uint64_t> opcodes_;
  // Per pickle: a finding for each kind of call of a call, with how often.
  std::map<std::string, std::pair<std::size_t, std::uint64_t>> repeated_findings_;
};

}  // namespace pthload::audit
