// The rules scan() judges globals by. The allow side is exact and generated from torch itself
// (scan_tables.inc); the deny side gathers, at the versions named below, what the public pickle
// scanners flag, plus what their advisories and issues since have shown reaches code:
//   picklescan 1.0.5 (mmaitre314/picklescan f15d54d, src/picklescan/scanner.py _unsafe_globals),
//   modelscan 0.8.8 (protectai/modelscan 8b8ed4b, modelscan/settings.py unsafe_globals),
//   fickling after 0.1.12 (trailofbits/fickling 854c99a, fickle.py UNSAFE_IMPORTS and
//   SAFE_BUILTINS, analysis.py UnsafeImportsML),
// and the advisories of 2025-2026 they cite (GHSA-9gvj-pp9x-gcfr, GHSA-5j3x-jp52-966f,
// GHSA-g38g-8gr9-h9xp, GHSA-6ggj-6f2q-f7mx, modelscan #338 and #346, among others).
// Where this file differs from them on purpose: functools.partial and operator's getters are
// dangerous when what they build is called (the scanner sees that), not merely for existing;
// uuid.UUID and torch.jit._pickle's list builders are data; torch.storage._load_from_bytes is
// judged by the nested pickle it unpickles, which the scanner scans.
#include "audit/global_rules.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

namespace pthload::audit {
namespace {

struct ModuleRename {
  std::string_view from;
  std::string_view to;
};
struct NameRename {
  std::string_view from_module;
  std::string_view from_name;
  std::string_view to_module;
  std::string_view to_name;
};

#include "audit/scan_tables.inc"

struct Name {
  std::string_view module;
  std::string_view name;
};

// Modules every attribute of which is dangerous, and their submodules (os.path is os).
constexpr auto kDangerousModules = std::to_array<std::string_view>({
    // processes, code, interpreters, imports
    "os",
    "nt",
    "posix",
    "_posixsubprocess",
    "subprocess",
    "pty",
    "commands",
    "multiprocessing",
    "runpy",
    "code",
    "codeop",
    "marshal",
    "types",
    "importlib",
    "_frozen_importlib",
    "_frozen_importlib_external",
    "_imp",
    "imp",
    "pkgutil",
    "zipimport",
    "gc",
    "site",
    "inspect",
    "_interpreters",
    "_xxsubinterpreters",
    "interpreters",
    "concurrent.interpreters",
    "sys",
    "signal",
    "_signal",
    "threading",
    "_thread",
    "atexit",
    "ctypes",
    "_ctypes",
    "pexpect",
    "pipes",
    "functools",
    // debuggers, profilers, test runners, tooling that runs code
    "bdb",
    "pdb",
    "cProfile",
    "profile",
    "timeit",
    "trace",
    "doctest",
    "unittest",
    "test",
    "pydoc",
    "idlelib",
    "lib2to3",
    "_pyrepl",
    "compileall",
    "py_compile",
    "venv",
    "ensurepip",
    "pip",
    "distutils",
    "setuptools",
    "_osx_support",
    "_aix_support",
    "platform",
    // unpicklers
    "pickle",
    "_pickle",
    "cPickle",
    "dill",
    "cloudpickle",
    "joblib",
    "shelve",
    "dbm",
    // files
    "shutil",
    "tempfile",
    "filecmp",
    "fileinput",
    "glob",
    "linecache",
    "difflib",
    "mmap",
    "tarfile",
    "zipfile",
    "logging",
    "syslog",
    "sqlite3",
    "_sqlite3",
    "mailcap",
    // network
    "socket",
    "_socket",
    "ssl",
    "select",
    "selectors",
    "socketserver",
    "xmlrpc",
    "http",
    "httplib",
    "urllib",
    "urllib2",
    "urllib3",
    "requests",
    "aiohttp",
    "asyncio",
    "webbrowser",
    "smtplib",
    "imaplib",
    "ftplib",
    "poplib",
    "telnetlib",
    "nntplib",
    "uuid",
    // third-party code paths
    "numpy.f2py",
    "numpy.distutils",
    "numpy.testing",
    "torch.hub",
    "torch._dynamo",
    "torch._inductor",
    "torch.compiler",
    "torch.jit",
    "torch.fx",
    "torch.package",
    "torch.utils.bottleneck",
    "torch.utils.collect_env",
    "torch.utils.cpp_extension",
    "torch.utils._config_module",
    "torch.utils.data.datapipes.utils.decoder",
    "torch.distributed.elastic.rendezvous.api",
    "transformers.dynamic_module_utils",
    "mlflow.projects",
});

// Exact names that are data although their module is listed as a whole.
constexpr auto kDataInDangerousModules = std::to_array<Name>({
    {"uuid", "UUID"},
    {"uuid", "SafeUUID"},
    {"torch.jit._pickle", "build_intlist"},
    {"torch.jit._pickle", "build_tensorlist"},
    {"torch.jit._pickle", "build_doublelist"},
    {"torch.jit._pickle", "build_boollist"},
    {"torch.jit._pickle", "build_tensor_from_id"},
    {"torch.jit._pickle", "restore_type_tag"},
});

// Single dangerous globals in modules that are otherwise ordinary.
constexpr auto kDangerousNames = std::to_array<Name>({
    {"operator", "call"},
    {"operator", "setitem"},
    {"operator", "delitem"},
    {"_operator", "call"},
    {"_operator", "setitem"},
    {"_operator", "delitem"},
    {"_io", "FileIO"},
    {"_io", "open"},
    {"_io", "open_code"},
    {"io", "FileIO"},
    {"io", "open"},
    {"io", "open_code"},
    {"torch", "load"},
    {"torch", "save"},
    {"torch", "from_file"},
    {"torch", "compile"},
    {"torch.storage", "UntypedStorage.from_file"},
    {"torch.storage", "TypedStorage.from_file"},
    {"torch._C", "_load_for_lite_interpreter"},
    {"torch._C", "import_ir_module"},
    {"torch._C", "import_ir_module_from_buffer"},
    {"numpy", "load"},
    {"numpy", "save"},
    {"numpy", "memmap"},
    {"numpy", "fromfile"},
    {"numpy", "loadtxt"},
    {"numpy", "savetxt"},
    {"numpy", "genfromtxt"},
    {"numpy.lib.npyio", "load"},
    {"numpy.lib.format", "open_memmap"},
    {"pandas", "read_pickle"},
    {"pandas.io.pickle", "read_pickle"},
    {"pandas.io.parsers.readers", "read_csv"},
    {"transformers.models.auto.auto_factory", "getattribute_from_module"},
    {"yaml", "load"},
    {"yaml", "unsafe_load"},
    {"yaml", "full_load"},
});

// Python's builtins that only make or inspect data (fickling's SAFE_BUILTINS); every other
// builtin (eval, exec, getattr, setattr, __import__, open, globals, vars, breakpoint, input,
// print, type, ...) is dangerous.
constexpr auto kDataBuiltins = std::to_array<std::string_view>({
    "bool",       "int",    "float",    "complex",  "str",       "bytes",
    "bytearray",  "list",   "tuple",    "set",      "frozenset", "dict",
    "len",        "abs",    "sum",      "min",      "max",       "round",
    "pow",        "divmod", "sorted",   "reversed", "enumerate", "zip",
    "range",      "map",    "filter",   "slice",    "iter",      "next",
    "all",        "any",    "hash",     "id",       "repr",      "ascii",
    "bin",        "hex",    "oct",      "ord",      "chr",       "isinstance",
    "issubclass", "object", "callable", "format",   "Ellipsis",  "NotImplemented",
});

// Attribute names that, as any part of a dotted name, reach code, processes, files or more
// unpickling whatever the object they hang from.
constexpr auto kDangerousAttributes = std::to_array<std::string_view>({
    "system",
    "popen",
    "popen2",
    "popen3",
    "popen4",
    "spawnl",
    "spawnle",
    "spawnlp",
    "spawnlpe",
    "spawnv",
    "spawnve",
    "spawnvp",
    "spawnvpe",
    "execl",
    "execle",
    "execlp",
    "execlpe",
    "execv",
    "execve",
    "execvp",
    "execvpe",
    "fork",
    "forkpty",
    "fork_exec",
    "posix_spawn",
    "posix_spawnp",
    "eval",
    "exec",
    "execfile",
    "compile",
    "__import__",
    "import_module",
    "load_source",
    "load_module",
    "run_path",
    "run_module",
    "_run_code",
    "_run_module_code",
    "check_output",
    "check_call",
    "getoutput",
    "getstatusoutput",
    "Popen",
    "urlopen",
    "urlretrieve",
    "read_pickle",
    "from_file",
    "load_library",
    "loads",
    "_loads",
    "load",
    "_load",
    "open",
    "runcode",
    "runsource",
    "runctx",
    "run_string",
    "runstring",
    "from_pretrained",
    "getattribute_from_module",
    "_get_command_stdout",
    "_read_output",
    "_read_cmd_output",
    "_find_build_tool",
    "pipe_pager",
    "tempfile_pager",
    "pipepager",
    "findmatch",
    "rmtree",
    "remove",
    "unlink",
    "rmdir",
    "removedirs",
    "rename",
    "chmod",
    "chown",
    "kill",
    "killpg",
    "putenv",
    "unsetenv",
    "setattr",
    "delattr",
    "getattr",
    "globals",
    "locals",
    "vars",
    "breakpoint",
    "write_text",
    "write_bytes",
    "mkdir",
    "makedirs",
    "symlink",
    "memmap",
    "fromfile",
    "loadtxt",
    "savetxt",
    "genfromtxt",
    "tofile",
    "_run_entry_point",
    "evaluate_guards_expression",
    "execWrapper",
    "load_config",
    "basichandlers",
    "run_cprofile",
    "run_autograd_prof",
    "debug_script",
    "debug_src",
    "_run_pip",
    "resolve_name",
    "locate",
    "spawnv_passfds",
    "write_file",
    "copyfile",
    "copytree",
    "_make_function",
    "subimport",
    "_builtin_type",
});

// What builds data only, though torch's weights-only unpickler refuses it: a kinder reason.
constexpr auto kDataOnly = std::to_array<Name>({
    {"collections", "defaultdict"},
    {"collections", "deque"},
    {"collections", "namedtuple"},
    {"copyreg", "_reconstructor"},
    {"numpy", "dtype"},
    {"numpy", "ndarray"},
    {"numpy.core.multiarray", "_reconstruct"},
    {"numpy.core.multiarray", "scalar"},
    {"numpy._core.multiarray", "_reconstruct"},
    {"numpy._core.multiarray", "scalar"},
    {"torch._utils", "_rebuild_sparse_csr_tensor"},
    {"torch._utils", "_rebuild_nested_tensor"},
    {"torch._tensor", "_rebuild_from_type"},
    {"torch.nested._internal.nested_tensor", "_rebuild_njt"},
    {"argparse", "Namespace"},
    {"datetime", "datetime"},
    {"datetime", "date"},
    {"datetime", "timedelta"},
    {"pathlib", "PosixPath"},
    {"pathlib", "WindowsPath"},
    {"pathlib", "PurePosixPath"},
});

constexpr auto kCallableBuilders = std::to_array<Name>({
    {"functools", "partial"},
    {"operator", "attrgetter"},
    {"operator", "itemgetter"},
    {"operator", "methodcaller"},
    {"_operator", "attrgetter"},
    {"_operator", "itemgetter"},
    {"_operator", "methodcaller"},
});

bool is_builtins(std::string_view module) {
  return module == "builtins" || module == "__builtin__" || module == "__builtins__";
}

bool is_dunder(std::string_view part) {
  return part.size() > 4 && part.starts_with("__") && part.ends_with("__");
}

template <typename Table>
bool contains(const Table& table, std::string_view module, std::string_view name) {
  return std::any_of(std::begin(table), std::end(table), [&](const auto& entry) {
    return entry.module == module && entry.name == name;
  });
}

template <typename Table>
bool contains(const Table& table, std::string_view text) {
  return std::find(std::begin(table), std::end(table), text) != std::end(table);
}

std::string key_of(std::string_view module, std::string_view name) {
  std::string key;
  key.reserve(module.size() + name.size() + 1);
  key.append(module).append(1, '\n').append(name);
  return key;
}

// The tables the rules look up per global, hashed once: a hostile pickle may name a great many
// distinct globals, each of whose dotted splits is looked up.
struct Lookups {
  std::unordered_set<std::string_view> dangerous_modules{kDangerousModules.begin(),
                                                         kDangerousModules.end()};
  std::unordered_set<std::string_view> dangerous_attributes{kDangerousAttributes.begin(),
                                                            kDangerousAttributes.end()};
  std::unordered_map<std::string_view, std::string_view> python_modules;
  std::unordered_map<std::string, Name> python_names;
  std::unordered_map<std::string, const AllowedGlobal*> allowed;

  Lookups() {
    for (const auto& rename : kPythonImportMapping)
      python_modules.emplace(rename.from, rename.to);
    for (const auto& rename : kPythonNameMapping)
      python_names.emplace(key_of(rename.from_module, rename.from_name),
                           Name{rename.to_module, rename.to_name});
    for (const auto& entry : kWeightsOnlyAllowed)
      allowed.emplace(fmt::format("{}.{}", entry.module, entry.name), &entry);
  }
};

const Lookups& lookups() {
  static const Lookups instance;
  return instance;
}

// Python's fix_imports (Lib/_compat_pickle.py): applied whatever the protocol, since a file
// chooses its protocol; the Python 2 spelling is judged as what it becomes.
Name python_canonical(Name global) {
  const auto& tables = lookups();
  if (const auto it = tables.python_names.find(key_of(global.module, global.name));
      it != tables.python_names.end()) {
    return it->second;
  }
  if (const auto it = tables.python_modules.find(global.module); it != tables.python_modules.end())
    return {it->second, global.name};
  return global;
}

Name torch_canonical(Name global) {
  for (const auto& rename : kTorchNameMapping)
    if (rename.from_module == global.module && rename.from_name == global.name)
      return {rename.to_module, rename.to_name};
  for (const auto& rename : kTorchImportMapping)
    if (rename.from == global.module) return {rename.to, global.name};
  return global;
}

// Whether `module` or a package it is inside is listed as a whole (os.path is os).
bool in_dangerous_module(std::string_view module) {
  const auto& modules = lookups().dangerous_modules;
  for (std::size_t dot = module.find('.'); dot != std::string_view::npos;
       dot = module.find('.', dot + 1)) {
    if (modules.contains(module.substr(0, dot))) return true;
  }
  return modules.contains(module);
}

// Whether the single global `module`.`name` (no attribute walk) is dangerous.
bool is_dangerous_exactly(std::string_view module, std::string_view name) {
  if (is_builtins(module)) return !contains(kDataBuiltins, name);
  if (contains(kDataInDangerousModules, module, name)) return false;
  if (in_dangerous_module(module)) return true;
  if (contains(kDangerousNames, module, name)) return true;
  // picklescan's substring rule for torch.serialization ("load"): _load, _legacy_load, ...
  if (module == "torch.serialization" && name.find("load") != std::string_view::npos) return true;
  return false;
}

std::vector<std::string_view> split(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = text.find('.', start);
    parts.push_back(text.substr(start, dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

std::string joined(const std::vector<std::string_view>& parts, std::size_t from, std::size_t to) {
  std::string text;
  for (std::size_t i = from; i < to; ++i) {
    if (i > from) text += '.';
    text += parts[i];
  }
  return text;
}

// A qualified name of more parts than this is not walked: only a file made to tire scanners
// holds one, and walking it would cost the square of its length.
constexpr std::size_t kMaxWalkedParts = 16;

// Why a dotted name is dangerous, or empty: find_class imports `module`, then walks the name's
// attributes, and an attribute may be another module (pathlib.os is os). Every split of the
// whole path into a module and a name is judged, and the attributes themselves.
std::string dangerous_walk(std::string_view module, std::string_view name) {
  const auto name_parts = split(name);
  for (const auto part : name_parts) {
    if (is_dunder(part)) {
      return fmt::format(
          "its name walks through {}, which reaches Python's internals (builtins, "
          "globals, other classes)",
          part);
    }
    if (lookups().dangerous_attributes.contains(part)) {
      return fmt::format("its name reaches the attribute {}", part);
    }
  }
  auto parts = split(module);
  parts.insert(parts.end(), name_parts.begin(), name_parts.end());
  if (parts.size() > kMaxWalkedParts) {
    return fmt::format(
        "a qualified name of {} parts, which only a file made to evade scanners "
        "holds",
        parts.size());
  }
  for (std::size_t first = 0; first < parts.size(); ++first) {
    for (std::size_t split_at = first + 1; split_at < parts.size(); ++split_at) {
      const std::string candidate_module = joined(parts, first, split_at);
      const std::string candidate_name = joined(parts, split_at, parts.size());
      const Name canonical = python_canonical({candidate_module, candidate_name});
      if (is_dangerous_exactly(canonical.module, canonical.name)) {
        return fmt::format("Python resolves it through attributes to {}.{}", canonical.module,
                           canonical.name);
      }
    }
  }
  return {};
}

}  // namespace

std::span<const AllowedGlobal> weights_only_table() noexcept {
  return kWeightsOnlyAllowed;
}

std::string_view weights_only_torch_version() noexcept {
  return kWeightsOnlyTorchVersion;
}

const AllowedGlobal* weights_only_entry(std::string_view module, std::string_view name) {
  const Name canonical = torch_canonical({module, name});
  const auto& table = lookups().allowed;
  const auto it = table.find(fmt::format("{}.{}", canonical.module, canonical.name));
  return it == table.end() ? nullptr : it->second;
}

bool weights_only_allows(std::string_view module, std::string_view name) {
  const Name canonical = torch_canonical({module, name});
  // torch/_weights_only_unpickler.py _blocklisted_modules, checked before the allow list.
  if (canonical.module == "sys" || canonical.module == "os" || canonical.module == "posix" ||
      canonical.module == "nt") {
    return false;
  }
  return weights_only_entry(module, name) != nullptr;
}

bool builds_callables(std::string_view module, std::string_view name) {
  return contains(kCallableBuilders, module, name);
}

GlobalJudgement judge_global(std::string_view module, std::string_view name) {
  const bool dotted = name.find('.') != std::string_view::npos;
  const Name canonical = python_canonical({module, name});
  if (builds_callables(canonical.module, canonical.name)) {
    return {Verdict::kUnknown,
            "builds a callable: dangerous when the pickle calls what it builds, which scan "
            "reports apart"};
  }
  if (!dotted && is_dangerous_exactly(canonical.module, canonical.name)) {
    return {Verdict::kDangerous, "on the deny list"};
  }
  if (!dotted && lookups().dangerous_attributes.contains(canonical.name) &&
      !weights_only_allows(module, name)) {
    return {Verdict::kDangerous,
            fmt::format("a function named {}, which reaches code, processes, files or more "
                        "unpickling wherever it is defined",
                        canonical.name)};
  }
  if (dotted) {
    std::string why = dangerous_walk(canonical.module, canonical.name);
    if (!why.empty()) return {Verdict::kDangerous, std::move(why)};
  }
  // The module and the name as torch writes them, whole: a dotted name is never safe, even when
  // its full path is allowed (torch + _utils._rebuild_tensor_v2).
  if (!dotted && weights_only_allows(module, name)) return {Verdict::kSafe, {}};
  if (dotted) {
    return {Verdict::kUnknown,
            "a dotted name: Python walks its attributes (with protocol 4 and later); torch.save "
            "never writes one"};
  }
  if (canonical.module == "__torch__" || canonical.module.starts_with("__torch__.")) {
    return {Verdict::kUnknown,
            "a TorchScript class: torch.jit.load compiles its code from the archive's code/ "
            "records (judged apart); outside a TorchScript archive, a name the file chose"};
  }
  if (contains(kDataOnly, canonical.module, canonical.name) ||
      (is_builtins(canonical.module) && contains(kDataBuiltins, canonical.name))) {
    return {Verdict::kUnknown,
            fmt::format("builds data, but torch {}'s weights-only loader refuses it",
                        kWeightsOnlyTorchVersion)};
  }
  return {Verdict::kUnknown,
          fmt::format("not on torch {}'s weights-only allow list: loading imports it and runs "
                      "whatever code it has",
                      kWeightsOnlyTorchVersion)};
}

}  // namespace pthload::audit
