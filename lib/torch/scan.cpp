// scan() and verify_records(): a security verdict from the pickle machine's real state, and a
// CRC check of every record. The dangerous list gathers what picklescan (src/picklescan/
// scanner.py _unsafe_globals), modelscan (modelscan/settings.py unsafe_globals) and fickling
// flag, plus the issue's own list; "safe" is what pthload interprets, which is what torch's
// weights-only unpickler allows.
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/check.hpp"
#include "common/mapped_file.hpp"
#include "pickle/census.hpp"
#include "pickle/machine.hpp"
#include "pickle/opcodes.hpp"
#include "pthload/error.hpp"
#include "pthload/inspect.hpp"
#include "torch/interpreted.hpp"
#include "torch/read_image.hpp"
#include "zip/archive.hpp"

namespace pthload {
namespace {

using pickle::Kind;
using pickle::Opcode;
using pickle::Value;

// Modules every global of which is dangerous (their submodules too: os.path is os).
constexpr auto kDangerousModules = std::to_array<std::string_view>({"os",
                                                                    "nt",
                                                                    "posix",
                                                                    "_posixsubprocess",
                                                                    "subprocess",
                                                                    "runpy",
                                                                    "importlib",
                                                                    "imp",
                                                                    "zipimport",
                                                                    "pty",
                                                                    "socket",
                                                                    "shutil",
                                                                    "webbrowser",
                                                                    "ctypes",
                                                                    "_ctypes",
                                                                    "marshal",
                                                                    "pickle",
                                                                    "_pickle",
                                                                    "cPickle",
                                                                    "dill",
                                                                    "sys",
                                                                    "asyncio",
                                                                    "aiohttp",
                                                                    "bdb",
                                                                    "pdb",
                                                                    "commands",
                                                                    "httplib",
                                                                    "http",
                                                                    "requests",
                                                                    "urllib",
                                                                    "urllib2",
                                                                    "urllib3",
                                                                    "ssl",
                                                                    "numpy.f2py",
                                                                    "pip",
                                                                    "pydoc",
                                                                    "timeit",
                                                                    "venv",
                                                                    "code",
                                                                    "codeop",
                                                                    "multiprocessing",
                                                                    "ensurepip",
                                                                    "types",
                                                                    "distutils.file_util",
                                                                    "numpy.testing._private.utils",
                                                                    "idlelib",
                                                                    "lib2to3",
                                                                    "ftplib"});

struct DangerousName {
  std::string_view module;
  std::string_view name;
};
// Single globals that run code, read or write files, or unpickle more (a pickle inside a
// pickle that no scanner of the outer one sees).
constexpr auto kDangerousNames = std::to_array<DangerousName>({
    {"builtins", "eval"},
    {"builtins", "exec"},
    {"builtins", "compile"},
    {"builtins", "getattr"},
    {"builtins", "setattr"},
    {"builtins", "delattr"},
    {"builtins", "__import__"},
    {"builtins", "open"},
    {"builtins", "breakpoint"},
    {"builtins", "apply"},
    {"builtins", "input"},
    {"builtins", "globals"},
    {"builtins", "locals"},
    {"builtins", "vars"},
    {"builtins", "execfile"},
    {"builtins", "file"},
    {"builtins", "reload"},
    {"functools", "reduce"},
    {"torch", "load"},
    {"torch.serialization", "load"},
    {"torch.hub", "load"},
    {"torch.hub", "load_state_dict_from_url"},
    {"torch._inductor.codecache", "compile_file"},
    {"torch.utils._config_module", "ConfigModule.load_config"},
    {"torch.utils.collect_env", "run"},
    {"torch.utils.bottleneck.__main__", "run_cprofile"},
    {"torch.utils.bottleneck.__main__", "run_autograd_prof"},
    {"torch.jit.unsupported_tensor_ops", "execWrapper"},
    {"torch.fx.experimental.symbolic_shapes", "ShapeEnv.evaluate_guards_expression"},
    {"torch._dynamo.guards", "GuardBuilder.get"},
    {"torch.utils.data.datapipes.utils.decoder", "basichandlers"},
    {"numpy", "load"},
    {"numpy.lib.npyio", "load"},
    {"pandas.io.pickle", "read_pickle"},
    {"cProfile", "run"},
    {"cProfile", "runctx"},
});
// Also flagged by picklescan by name within otherwise ordinary modules.
constexpr auto kDangerousMethods = std::to_array<DangerousName>({
    {"profile", "Profile.run"},
    {"profile", "Profile.runctx"},
    {"trace", "Trace.run"},
    {"trace", "Trace.runctx"},
    {"doctest", "debug_script"},
    {"code", "InteractiveInterpreter.runcode"},
    {"joblib", "load"},
});

bool is_builtins(std::string_view module) {
  return module == "builtins" || module == "__builtin__" || module == "__builtins__";
}

// Whether `module` is `parent` or inside it.
bool within(std::string_view module, std::string_view parent) {
  return module == parent || (module.size() > parent.size() && module.starts_with(parent) &&
                              module[parent.size()] == '.');
}

bool is_dangerous(std::string_view module, std::string_view name) {
  for (const auto parent : kDangerousModules)
    if (within(module, parent)) return true;
  const std::string_view as_module = is_builtins(module) ? "builtins" : module;
  for (const auto& entry : kDangerousNames) {
    // A qualified name reaches the same function through an attribute: "system.__call__".
    if (entry.module == as_module &&
        (name == entry.name || name.starts_with(std::string(entry.name) + ".")))
      return true;
  }
  for (const auto& entry : kDangerousMethods)
    if (entry.module == module && name == entry.name) return true;
  return false;
}

Verdict classify(const Value& global, bool torchscript) {
  const std::string_view module = global.module();
  const std::string_view name = global.name();
  if (is_dangerous(module, name)) return Verdict::kDangerous;
  // TorchScript's own classes are data in a TorchScript archive (torch.jit.load); anywhere
  // else, __torch__ is a name a file chose.
  if (module.starts_with("__torch__")) return torchscript ? Verdict::kSafe : Verdict::kUnknown;
  return torch::is_interpreted(global) ? Verdict::kSafe : Verdict::kUnknown;
}

// Opcodes CPython's pickler (protocols 2-5) and torch's own pickler never write: a file holding
// them was made by hand. INST and OBJ (protocol 0/1 objects), EXT* (copyreg's registry), the
// text opcodes of protocol 0, DUP (no pickler writes it), POP and POP_MARK (only for recursive
// tuples, which checkpoints do not hold; the classic way to discard a call's result), PERSID as
// text, and out-of-band buffers.
constexpr auto kNeverWritten = std::to_array<Opcode>(
    {Opcode::kInst,    Opcode::kObj,    Opcode::kExt1,       Opcode::kExt2,
     Opcode::kExt4,    Opcode::kDup,    Opcode::kPop,        Opcode::kPopMark,
     Opcode::kInt,     Opcode::kLong,   Opcode::kFloat,      Opcode::kString,
     Opcode::kUnicode, Opcode::kGet,    Opcode::kPut,        Opcode::kDict,
     Opcode::kList,    Opcode::kPersId, Opcode::kNextBuffer, Opcode::kReadonlyBuffer});

// What protocols 0 and 1 write, which torch.save(pickle_protocol=0 or 1) therefore writes too: a
// pickle without PROTO may hold these (Lib/pickle.py save_long, save_float, save_str, memoize,
// save_dict, save_list, persistent_id).
constexpr auto kTextProtocolOpcodes = std::to_array<Opcode>(
    {Opcode::kInt, Opcode::kLong, Opcode::kFloat, Opcode::kString, Opcode::kUnicode, Opcode::kGet,
     Opcode::kPut, Opcode::kDict, Opcode::kList, Opcode::kPersId});

std::string at(std::string_view where, std::uint64_t offset) {
  return fmt::format("{}+{:#x}", where, offset);
}

class Scanner {
 public:
  Scanner(ScanReport& report, const LoadOptions& options, bool torchscript)
      : report_(report), options_(options), torchscript_(torchscript) {}

  void finding(Verdict severity, std::string where, std::string message) {
    report_.findings.push_back({severity, std::move(where), std::move(message)});
  }

  // Runs one pickle at the start of `bytes`; returns where it ended (past STOP), or nullopt
  // when the machine refused it (a finding says why; what it read before counts).
  std::optional<std::size_t> scan_pickle(std::span<const std::byte> bytes, const std::string& where,
                                         int depth) {
    const pickle::OpcodeCensus census = pickle::opcode_census(bytes);
    for (std::size_t op = 0; op < census.counts.size(); ++op)
      if (census.counts[op] > 0) {
        const auto name = pickle::opcode_name(static_cast<std::uint8_t>(op));
        opcodes_[name.empty() ? fmt::format("{:#04x}", op) : std::string(name)] +=
            census.counts[op];
      }
    const bool text_protocol = census.counts[static_cast<std::uint8_t>(Opcode::kProto)] == 0;
    for (const Opcode op : kNeverWritten) {
      const auto count = census.counts[static_cast<std::uint8_t>(op)];
      if (text_protocol && std::find(kTextProtocolOpcodes.begin(), kTextProtocolOpcodes.end(),
                                     op) != kTextProtocolOpcodes.end()) {
        continue;
      }
      if (count > 0) {
        finding(Verdict::kUnknown, where,
                fmt::format("opcode {} ({} time{}), which torch.save never writes",
                            pickle::opcode_name(static_cast<std::uint8_t>(op)), count,
                            count == 1 ? "" : "s"));
      }
    }
    std::vector<std::pair<std::string, std::vector<std::byte>>> nested;
    std::set<const Value*> nested_seen;
    // A finding per kind of call of a call, with how often: one per call took ~47 bytes per
    // pickle byte (5 MB of `len()()` calls: 238 MB and a million identical lines).
    std::map<std::string, std::pair<std::size_t, std::uint64_t>> calls_of_calls;
    pickle::RunOptions run_options;
    run_options.allow_trailing_bytes = true;
    run_options.on_global_or_call = [&](const Value& value) {
      if (value.is(Kind::kGlobal)) {
        add_global(value, false, where);
        return;
      }
      const Value& callable = value.callable();
      // Calling what a call returned: getattr(os, 'system')(...), attrgetter('system')(os),
      // partial(f, ...)(...). picklescan and modelscan flag functools.partial and operator's
      // getters wherever they appear; the machine's state tells more: they are dangerous when
      // what they built is called, and otherwise objects like any other (containers.pt holds
      // a partial). torch.save never writes such a call.
      if (callable.is(Kind::kCall)) {
        const Value* maker = &callable;
        for (int hops = 0; maker->is(Kind::kCall) && hops < 64; ++hops)
          maker = &maker->callable();
        std::string message =
            maker->is(Kind::kGlobal)
                ? fmt::format(
                      "calls what a call of {}.{} returned (a callable built while "
                      "unpickling)",
                      maker->module(), maker->name())
                : std::string("calls a callable built while unpickling");
        const auto [it, first] =
            calls_of_calls.try_emplace(std::move(message), report_.findings.size(), 0);
        if (first) finding(Verdict::kDangerous, where, it->first);
        ++it->second.second;
        return;
      }
      if (!callable.is(Kind::kGlobal)) return;
      add_global(callable, true, where);
      // The bytes a loads-like call unpickles: a pickle no linear scan of this one sees.
      const bool loads =
          callable.is_global("torch.storage", "_load_from_bytes") ||
          ((within(callable.module(), "pickle") || within(callable.module(), "_pickle") ||
            within(callable.module(), "dill") || callable.module() == "cPickle") &&
           (callable.name() == "loads" || callable.name() == "_loads"));
      const auto args = value.args().items();
      // Each bytes value once: a memo GET hands the same value to any number of calls, and
      // copying it per call would let a small file take any amount of memory.
      if (loads && !args.empty() && args[0]->is(Kind::kBytes) &&
          nested_seen.insert(args[0]).second) {
        const auto inner = args[0]->as_bytes();
        nested.emplace_back(fmt::format("{}.{}", callable.module(), callable.name()),
                            std::vector<std::byte>(inner.begin(), inner.end()));
      }
    };
    std::optional<std::size_t> end;
    try {
      pickle::Machine machine(options_.limits);
      const pickle::Result result = machine.run(bytes, run_options);
      end = result.end_offset;
    } catch (const Error& e) {
      finding(Verdict::kUnknown, where,
              fmt::format("the pickle cannot be read to its end ({}); torch.load would run it up "
                          "to there",
                          e.what()));
    }
    for (const auto& [message, place] : calls_of_calls) {
      const auto [index, times] = place;
      if (times > 1) report_.findings[index].message += fmt::format(" ({} times)", times);
    }
    for (auto& [callable, inner] : nested) {
      const std::string inner_where = fmt::format("{} > pickle given to {}", where, callable);
      if (depth >= kMaxNesting) {
        finding(Verdict::kDangerous, inner_where, "pickles nested too deeply to scan");
        continue;
      }
      if (callable != "torch.storage._load_from_bytes") {
        finding(Verdict::kUnknown, inner_where, "a nested pickle stream");
      }
      // _load_from_bytes is torch.load on the bytes: a legacy stream of stacked pickles.
      scan_stream(inner, inner_where, depth + 1);
    }
    return end;
  }

  // Stacked pickles from the start of `bytes` (a legacy stream, or a bare pickle). Returns the
  // format: "legacy" when the first pickle is torch's magic number, "pickle" otherwise, "" when
  // no pickle could be read at all.
  std::string scan_stream(std::span<const std::byte> bytes, const std::string& where, int depth) {
    const std::size_t globals_before = globals_.size();
    const std::size_t findings_before = report_.findings.size();
    const auto first = scan_pickle(bytes, fmt::format("{} pickle 1", where), depth);
    if (!first) {
      if (globals_.size() == globals_before) {
        report_.findings.resize(findings_before);
        return "";
      }
      return "pickle";
    }
    // torch/serialization.py _legacy_save: magic number, protocol version, sys_info, the
    // object, the storage keys; then the storages' raw bytes.
    if (!is_legacy_magic(bytes.first(*first))) {
      if (*first < bytes.size()) {
        finding(Verdict::kUnknown, at(where, *first),
                fmt::format("{} bytes after the pickle's STOP", bytes.size() - *first));
      }
      finding(Verdict::kUnknown, where,
              "a bare pickle, not a torch.save stream: torch.load runs it, then fails on the "
              "magic number");
      return "pickle";
    }
    std::size_t offset = *first;
    for (int index = 2; index <= 5 && offset < bytes.size(); ++index) {
      const auto end =
          scan_pickle(bytes.subspan(offset), fmt::format("{} pickle {}", where, index), depth);
      if (!end) break;
      offset += *end;
    }
    return "legacy";
  }

  void finish() {
    for (auto& [key, global] : globals_)
      report_.globals.push_back(std::move(global));
    for (auto& [name, count] : opcodes_)
      report_.opcodes.emplace_back(name, count);
    Verdict worst = Verdict::kSafe;
    for (const auto& global : report_.globals)
      worst = std::max(worst, global.verdict);
    for (const auto& finding : report_.findings)
      worst = std::max(worst, finding.severity);
    report_.verdict = std::max(report_.verdict, worst);
  }

 private:
  static constexpr int kMaxNesting = 4;

  static bool is_legacy_magic(std::span<const std::byte> pickle_bytes) {
    // 0x1950a86a20f9469cfc6c as LONG1: 10 little-endian bytes.
    static constexpr std::array<unsigned char, 12> kMagicLong1{0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                                               0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    const auto* begin = reinterpret_cast<const unsigned char*>(pickle_bytes.data());
    if (std::search(begin, begin + pickle_bytes.size(), kMagicLong1.begin(), kMagicLong1.end()) !=
        begin + pickle_bytes.size()) {
      return true;
    }
    // Protocols 0 and 1 write it as a text LONG: L119547037146038801333356L.
    const std::string_view text(reinterpret_cast<const char*>(begin), pickle_bytes.size());
    return text.starts_with("L119547037146038801333356");
  }

  void add_global(const Value& global, bool called, const std::string& where) {
    auto key = std::make_tuple(std::string(global.module()), std::string(global.name()), where);
    auto [it, inserted] = globals_.try_emplace(key);
    if (inserted) {
      it->second = {.module = std::get<0>(key),
                    .name = std::get<1>(key),
                    .verdict = classify(global, torchscript_),
                    .called = called,
                    .where = where};
    }
    it->second.called = it->second.called || called;
  }

  ScanReport& report_;
  const LoadOptions& options_;
  bool torchscript_;
  std::map<std::tuple<std::string, std::string, std::string>, ScannedGlobal> globals_;
  std::map<std::string, std::uint64_t> opcodes_;
};

bool starts_with(std::span<const std::byte> bytes, std::string_view prefix) {
  return bytes.size() >= prefix.size() &&
         std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
}

void scan_zip(const common::MappedFile& file, ScanReport& report, const LoadOptions& options) {
  std::optional<zip::Archive> archive;
  try {
    archive.emplace(zip::Archive::parse(file, options.limits));
  } catch (const Error& e) {
    const bool misleading = e.code() == Errc::kZipLocalHeaderMismatch ||
                            e.code() == Errc::kZipRecordsOverlap ||
                            e.code() == Errc::kZipDuplicateName;
    report.findings.push_back(
        {misleading ? Verdict::kDangerous : Verdict::kNotACheckpoint, "zip",
         misleading ? fmt::format("{}: zip readers disagree on what this file holds, the trick "
                                  "that hides a pickle from scanners",
                                  e.what())
                    : fmt::format("not a readable zip archive: {}", e.what())});
    report.verdict = misleading ? Verdict::kDangerous : Verdict::kNotACheckpoint;
    report.format = misleading ? "zip" : "";
    return;
  }
  const auto& entries = archive->entries();
  // The records torch.load runs and open() reads: those under the first record's folder
  // (inline_container.cc init), not any data.pkl or constants.pkl elsewhere in the archive.
  const std::size_t slash = entries.empty() ? std::string::npos : entries.front().name.find('/');
  const std::string prefix = slash == std::string::npos
                                 ? std::string()
                                 : std::string(entries.front().name.substr(0, slash + 1));
  const auto is_top_record = [&](std::string_view name, std::string_view record) {
    return !prefix.empty() && name.size() == prefix.size() + record.size() &&
           name.starts_with(prefix) && name.ends_with(record);
  };
  bool torchscript = false;
  bool has_data_pickle = false;
  std::size_t outside_records = 0;
  std::string_view first_outside;
  for (const auto& entry : entries) {
    torchscript = torchscript || is_top_record(entry.name, "constants.pkl");
    has_data_pickle = has_data_pickle || is_top_record(entry.name, "data.pkl");
    if (!prefix.empty() && !entry.name.starts_with(prefix) && outside_records++ == 0) {
      first_outside = entry.name;
    }
  }
  report.format = torchscript ? "torchscript" : "zip";
  Scanner scanner(report, options, torchscript);
  if (outside_records > 0) {
    // PyTorchStreamReader::getAllRecords, which torch.load calls on every zip, throws "file in
    // archive is not in a subdirectory" for them.
    scanner.finding(Verdict::kUnknown, std::string(first_outside),
                    fmt::format("{} record{} outside the folder {} that the first record names: "
                                "torch.load refuses such an archive",
                                outside_records, outside_records == 1 ? " lies" : "s lie", prefix));
  }
  if (!has_data_pickle) {
    scanner.finding(Verdict::kNotACheckpoint, "zip",
                    prefix.empty()
                        ? std::string("the first record is not inside a folder, as torch's "
                                      "records always are: not a torch.save checkpoint")
                        : fmt::format("no {}data.pkl: not a torch.save checkpoint", prefix));
    report.verdict = Verdict::kNotACheckpoint;
    report.format = "";
  }
  for (const auto& entry : entries) {
    const std::string_view name = entry.name;
    const bool is_code = name.find("/code/") != std::string_view::npos || name.ends_with(".py") ||
                         name.ends_with(".pyc");
    if (is_code && !torchscript) {
      scanner.finding(Verdict::kUnknown, std::string(entry.name),
                      "a code record outside a TorchScript archive");
    }
    // torch.jit.save writes constants.pkl beside data.pkl, and traced_inputs.pkl for a traced
    // module (torch/csrc/jit/serialization/export_module.cpp).
    const bool expected_pickle = is_top_record(name, "data.pkl") ||
                                 (torchscript && (is_top_record(name, "constants.pkl") ||
                                                  is_top_record(name, "traced_inputs.pkl")));
    // TorchScript archives keep debug pickles beside their code (code/*.debug_pkl).
    const bool is_pickle = name.ends_with(".pkl") || name.ends_with(".pickle");
    if (!is_pickle) continue;
    if (!expected_pickle) {
      scanner.finding(Verdict::kUnknown, std::string(entry.name),
                      "a pickle record torch.save does not write (torch writes one data.pkl)");
    }
    try {
      const auto record = archive->read(entry);
      const auto bytes = record.bytes();
      const auto end = scanner.scan_pickle(bytes, std::string(entry.name), 0);
      if (end && *end < bytes.size()) {
        scanner.finding(Verdict::kUnknown, at(entry.name, *end),
                        fmt::format("{} bytes after the pickle's STOP", bytes.size() - *end));
        // A second pickle there is not run by torch.load, but it is what a reader of the file
        // would find: scan it too.
        (void)scanner.scan_pickle(bytes.subspan(*end), at(entry.name, *end), 0);
      }
    } catch (const Error& e) {
      scanner.finding(Verdict::kUnknown, std::string(entry.name),
                      fmt::format("the record cannot be read: {}", e.what()));
    }
  }
  scanner.finish();
}

}  // namespace

std::string_view verdict_name(Verdict verdict) noexcept {
  switch (verdict) {
    case Verdict::kSafe:
      return "safe";
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kDangerous:
      return "dangerous";
    case Verdict::kNotACheckpoint:
      return "not a checkpoint";
  }
  return "unknown";
}

ScanReport scan(const std::filesystem::path& path, const LoadOptions& options) {
  ScanReport report;
  const std::string path_text = path.string();
  common::MappedFile file =
      common::with_context({.path = path_text}, [&] { return common::MappedFile::open(path); });
  const auto bytes = file.bytes();
  if (starts_with(bytes, "PK\x03\x04") || starts_with(bytes, "PK\x05\x06")) {
    scan_zip(file, report, options);
    return report;
  }
  // safetensors (8-byte little-endian header size, then a JSON object): data only, no code.
  // Read as a pickle (torch.load's legacy path), such a file stops at byte 8 at the latest ('{'
  // is no opcode): eight bytes cannot import and call anything (GLOBAL alone needs two lines).
  if (bytes.size() >= 10 && std::to_integer<char>(bytes[8]) == '{') {
    std::uint64_t header_size = 0;
    for (std::size_t i = 0; i < 8; ++i)
      header_size |= std::to_integer<std::uint64_t>(bytes[i]) << (8 * i);
    if (header_size >= 2 && header_size <= bytes.size() - 8) {
      report.format = "safetensors";
      return report;
    }
  }
  Scanner scanner(report, options, false);
  report.format = scanner.scan_stream(bytes, "stream", 0);
  if (report.format.empty()) {
    report.findings.push_back(
        {Verdict::kNotACheckpoint, "", "neither a zip checkpoint nor a pickle stream"});
    report.verdict = Verdict::kNotACheckpoint;
  }
  scanner.finish();
  return report;
}

std::vector<RecordProblem> verify_records(const std::filesystem::path& path,
                                          const std::function<void(std::uint64_t)>& progress,
                                          const LoadOptions& options) {
  std::vector<RecordProblem> problems;
  try {
    // The index read with pread, the records checked a chunk at a time with pread: a file
    // truncated meanwhile is an IoError, not SIGBUS.
    const auto file = torch::index_file_image(path, options.limits);
    const auto archive = zip::Archive::parse(file, options.limits);
    for (const zip::Entry& entry : archive.entries()) {
      try {
        archive.verify_crc(entry);
      } catch (Error& e) {
        if (e.context().path.empty()) e.context().path = path.string();
        problems.push_back({std::string(entry.name), e.what()});
      }
      if (progress) progress(entry.compressed_size);
    }
  } catch (Error& e) {
    if (e.context().path.empty()) e.context().path = path.string();
    throw;
  }
  return problems;
}

}  // namespace pthload
