// judge_global(): safe by exact name on torch's weights-only allow list, dangerous by what Python
// would resolve the name to, unknown otherwise.
#include <doctest/doctest.h>

#include <string_view>

#include "audit/global_rules.hpp"

using pthload::Verdict;
using pthload::audit::judge_global;

namespace {

Verdict verdict_of(std::string_view module, std::string_view name) {
  return judge_global(module, name).verdict;
}

}  // namespace

TEST_CASE("global rules: what torch.save writes is safe, by exact name") {
  CHECK(verdict_of("torch._utils", "_rebuild_tensor_v2") == Verdict::kSafe);
  CHECK(verdict_of("collections", "OrderedDict") == Verdict::kSafe);
  CHECK(verdict_of("torch", "FloatStorage") == Verdict::kSafe);
  CHECK(verdict_of("torch", "bfloat16") == Verdict::kSafe);
  CHECK(verdict_of("_codecs", "encode") == Verdict::kSafe);
  CHECK(verdict_of("torch._tensor", "_rebuild_from_type_v2") == Verdict::kSafe);
  // Python 2's spelling of an allowed builtin, renamed as torch renames it.
  CHECK(verdict_of("__builtin__", "set") == Verdict::kSafe);
  CHECK(judge_global("torch._utils", "_rebuild_tensor_v2").reason.empty());
}

TEST_CASE("global rules: no prefix and no dotted path is allowed") {
  CHECK(verdict_of("torch._utils", "_rebuild_tensor_v2x") == Verdict::kUnknown);
  CHECK(verdict_of("torch._utils", "_rebuild_tensor") == Verdict::kSafe);
  CHECK(verdict_of("torch._utils", "_rebuild_") == Verdict::kUnknown);
  CHECK(verdict_of("torch", "_utils._rebuild_tensor_v2") == Verdict::kUnknown);
  CHECK(verdict_of("torch._utils.sub", "_rebuild_tensor_v2") == Verdict::kUnknown);
  // torch's alias names are not torch's allow list either ("torch.float" is no key).
  CHECK(verdict_of("torch", "float") == Verdict::kUnknown);
}

TEST_CASE("global rules: dotted names are judged by what Python resolves them to") {
  const auto eval = judge_global("torch._utils", "_rebuild_tensor_v2.__builtins__.__getitem__");
  CHECK(eval.verdict == Verdict::kDangerous);
  CHECK(eval.reason.find("__builtins__") != std::string::npos);
  CHECK(verdict_of("pathlib", "os.system") == Verdict::kDangerous);
  CHECK(verdict_of("torch.serialization", "os.system") == Verdict::kDangerous);
  CHECK(verdict_of("torch", "serialization.os.getcwd") == Verdict::kDangerous);
  CHECK(verdict_of("builtins", "print.__class__.__base__.__subclasses__") == Verdict::kDangerous);
  CHECK(verdict_of("json", "dumps.__globals__") == Verdict::kDangerous);
  // A dotted name that reaches nothing listed is still no name torch writes.
  CHECK(verdict_of("collections", "OrderedDict.fromkeys") == Verdict::kUnknown);
}

TEST_CASE("global rules: the published deny lists, and their advisories since") {
  for (const auto& [module, name] :
       {std::pair{"os", "system"},
        std::pair{"posix", "system"},
        std::pair{"nt", "system"},
        std::pair{"subprocess", "Popen"},
        std::pair{"builtins", "eval"},
        std::pair{"__builtin__", "eval"},
        std::pair{"builtins", "getattr"},
        std::pair{"builtins", "__import__"},
        std::pair{"profile", "run"},
        std::pair{"cProfile", "runctx"},
        std::pair{"uuid", "_get_command_stdout"},
        std::pair{"imaplib", "IMAP4_stream"},
        std::pair{"_aix_support", "_read_cmd_output"},
        std::pair{"_osx_support", "_find_build_tool"},
        std::pair{"_io", "FileIO"},
        std::pair{"io", "open"},
        std::pair{"mailcap", "findmatch"},
        std::pair{"_xxsubinterpreters", "run_string"},
        std::pair{"_interpreters", "run_string"},
        std::pair{"smtplib", "SMTP"},
        std::pair{"pkgutil", "resolve_name"},
        std::pair{"pydoc", "locate"},
        std::pair{"asyncio.unix_events", "_UnixSubprocessTransport._start"},
        std::pair{"torch.serialization", "_legacy_load"},
        std::pair{"torch", "from_file"},
        std::pair{"torch.utils.collect_env", "run"},
        std::pair{"numpy", "load"},
        std::pair{"functools", "reduce"},
        std::pair{"operator", "call"},
        std::pair{"logging", "FileHandler"},
        std::pair{"cloudpickle.cloudpickle", "subimport"},
        std::pair{"commands", "getoutput"},
        std::pair{"multiprocessing.util", "spawnv_passfds"},
        std::pair{"gzip", "open"}}) {
    CAPTURE(module);
    CAPTURE(name);
    CHECK(verdict_of(module, name) == Verdict::kDangerous);
  }
}

TEST_CASE("global rules: data, unknown code, and the callable builders") {
  // Known data that the weights-only loader refuses, and a class of the user's: unknown.
  CHECK(verdict_of("collections", "defaultdict") == Verdict::kUnknown);
  CHECK(verdict_of("builtins", "frozenset") == Verdict::kUnknown);
  CHECK(verdict_of("numpy.core.multiarray", "_reconstruct") == Verdict::kUnknown);
  CHECK(verdict_of("mymodel", "Net") == Verdict::kUnknown);
  CHECK(verdict_of("uuid", "UUID") == Verdict::kUnknown);
  CHECK(verdict_of("torch.jit._pickle", "build_intlist") == Verdict::kUnknown);
  // Dangerous only when what they build is called, which the scanner sees.
  CHECK(verdict_of("functools", "partial") == Verdict::kUnknown);
  CHECK(verdict_of("operator", "attrgetter") == Verdict::kUnknown);
  CHECK(pthload::audit::builds_callables("_operator", "methodcaller"));
}

TEST_CASE("global rules: torch's weights-only allow list and its blocked modules") {
  CHECK(pthload::audit::weights_only_allows("torch", "Size"));
  CHECK(pthload::audit::weights_only_allows("__builtin__", "set"));
  // torch compares the full path: a dotted name that spells an allowed one passes there.
  CHECK(pthload::audit::weights_only_allows("torch", "_utils._rebuild_tensor_v2"));
  CHECK(!pthload::audit::weights_only_allows("builtins", "frozenset"));
  CHECK(!pthload::audit::weights_only_allows("numpy", "ndarray"));
  CHECK(pthload::audit::weights_only_table().size() > 100);
  CHECK(pthload::audit::weights_only_torch_version() == "2.15.0");
}
