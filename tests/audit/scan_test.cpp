// scan() and RecordReader::verify_all(): a verdict from the pickle machine's state (every global
// and call it made, reachable or not), findings for what torch.save never writes, and CRC checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/records.hpp"
#include "pthload/scan.hpp"
#include "support/bytes.hpp"
#include "support/checkpoint_file.hpp"
#include "support/pickle_writer.hpp"

using pthload::Verdict;
using pthload::test::checkpoint_file;
using pthload::test::float_record;
using pthload::test::PickleWriter;

namespace {

// {'w': a float tensor} as torch.save writes it.
std::string clean_pickle() {
  PickleWriter p;
  p.empty_dict().mark();
  p.str("w").tensor_v2("FloatStorage", "0", 6, 0, {2, 3}, {3, 1});
  return p.setitems().stop().bytes();
}

const pthload::ScannedGlobal* find_global(const pthload::ScanReport& report,
                                          std::string_view module, std::string_view name) {
  const auto it = std::find_if(report.globals.begin(), report.globals.end(),
                               [&](const auto& g) { return g.module == module && g.name == name; });
  return it == report.globals.end() ? nullptr : &*it;
}

bool has_finding(const pthload::ScanReport& report, std::string_view text) {
  return std::any_of(report.findings.begin(), report.findings.end(),
                     [&](const auto& f) { return f.message.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("scan: a torch.save state dict is safe, its globals all interpreted") {
  const auto file =
      checkpoint_file(clean_pickle(), {{.name = "ck/data/0", .data = float_record(6)}});
  const auto report = pthload::scan(file.path());
  CHECK(report.verdict == Verdict::kSafe);
  CHECK(report.format == "zip");
  CHECK(report.findings.empty());
  CHECK(report.weights_only.accepted);
  CHECK(report.weights_only.torch_version == "2.15.0");
  const auto* rebuild = find_global(report, "torch._utils", "_rebuild_tensor_v2");
  REQUIRE(rebuild != nullptr);
  CHECK(rebuild->called);
  CHECK(rebuild->verdict == Verdict::kSafe);
  CHECK(rebuild->where == "ck/data.pkl");
  CHECK(std::any_of(report.opcodes.begin(), report.opcodes.end(),
                    [](const auto& op) { return op.first == "BINPERSID" && op.second == 1; }));
}

TEST_CASE("scan: a call whose result is popped is still dangerous") {
  PickleWriter p;
  p.global("os", "system").mark().str("echo pwned").tuple().reduce().op('0').empty_dict().stop();
  const auto file = checkpoint_file(p.bytes(), {});
  const auto report = pthload::scan(file.path());
  CHECK(report.verdict == Verdict::kDangerous);
  const auto* system = find_global(report, "os", "system");
  REQUIRE(system != nullptr);
  CHECK(system->called);
  CHECK(system->verdict == Verdict::kDangerous);
  // POP is how the result was discarded: torch.save never writes it.
  CHECK(has_finding(report, "opcode POP"));
}

TEST_CASE("scan: calls of what one call returned are one finding, with how often") {
  // builtins.len() kept in the memo, then called three times: one line, not one per call (a
  // million calls made a million findings, 47 bytes of memory per pickle byte).
  PickleWriter p;
  p.global("builtins", "len").empty_tuple().reduce().put(0);
  for (int i = 0; i < 3; ++i)
    p.get(0).empty_tuple().reduce().op('0');
  const auto file = checkpoint_file(p.op('0').empty_dict().stop().bytes(), {});
  const auto report = pthload::scan(file.path());
  CHECK(report.verdict == Verdict::kDangerous);
  const auto calls =
      std::count_if(report.findings.begin(), report.findings.end(), [](const auto& f) {
        return f.message.find("calls what a call of builtins.len returned") != std::string::npos;
      });
  CHECK(calls == 1);
  CHECK(has_finding(report, "unpickling) (3 times)"));
}

TEST_CASE("scan: an opaque class is unknown; submodules of a dangerous module are dangerous") {
  PickleWriter opaque;
  opaque.global("argparse", "Namespace").empty_tuple().reduce().stop();
  const auto opaque_file = checkpoint_file(opaque.bytes(), {});
  CHECK(pthload::scan(opaque_file.path()).verdict == Verdict::kUnknown);

  PickleWriter sub;
  sub.global("os.path", "join").empty_tuple().reduce().stop();
  const auto sub_file = checkpoint_file(sub.bytes(), {});
  CHECK(pthload::scan(sub_file.path()).verdict == Verdict::kDangerous);
}

TEST_CASE("scan: bytes after STOP and a second pickle there are reported and scanned") {
  PickleWriter second;
  second.global("builtins", "eval").mark().str("1").tuple().reduce().stop();
  const auto file = checkpoint_file(clean_pickle() + "\x80\x02" + second.bytes(),
                                    {{.name = "ck/data/0", .data = float_record(6)}});
  const auto report = pthload::scan(file.path());
  CHECK(has_finding(report, "bytes after the pickle's STOP"));
  const auto* eval = find_global(report, "builtins", "eval");
  REQUIRE(eval != nullptr);
  CHECK(report.verdict == Verdict::kDangerous);
}

TEST_CASE("scan: a file that is neither zip nor pickle is not a checkpoint") {
  const std::string path = "scan_test_not_a_checkpoint.txt";
  std::ofstream(path) << "hello, world\n";
  CHECK(pthload::scan(path).verdict == Verdict::kNotACheckpoint);
  std::remove(path.c_str());
  CHECK_THROWS_AS((void)pthload::scan("/nonexistent/pthload/scan.pt"), pthload::IoError);
}

TEST_CASE("scan: only the first record's folder holds the pickles torch runs, as open() reads") {
  using pthload::test::TempPath;
  using pthload::test::zip_build::build;
  // A constants.pkl in another folder makes no TorchScript archive: a code record beside it is
  // still reported, and that folder's pickles are ones torch.load never runs.
  const auto elsewhere = TempPath(build({{.name = "ck/data.pkl", .data = clean_pickle()},
                                         {.name = "ck/data/0", .data = float_record(6)},
                                         {.name = "other/constants.pkl", .data = clean_pickle()},
                                         {.name = "other/code/m.py", .data = "x = 1\n"}})
                                      .bytes);
  const auto report = pthload::scan(elsewhere.path());
  CHECK(report.format == "zip");
  CHECK(pthload::open(elsewhere.path()).format() == pthload::Format::kZip);
  CHECK(has_finding(report, "a code record outside a TorchScript archive"));
  CHECK(has_finding(report, "a pickle record torch.load does not run"));
  CHECK(has_finding(report, "2 records lie outside the folder ck/ that the first record names"));
  CHECK(report.verdict == Verdict::kUnknown);

  // A data.pkl outside the first record's folder is not the one torch.load looks for.
  const auto misplaced = TempPath(build({{.name = "ck/version", .data = "3\n"},
                                         {.name = "other/data.pkl", .data = clean_pickle()}})
                                      .bytes);
  const auto misplaced_report = pthload::scan(misplaced.path());
  // It holds a pickle another loader may run: judged, not "not a checkpoint"; torch refuses it.
  CHECK(misplaced_report.verdict == Verdict::kUnknown);
  CHECK(!misplaced_report.weights_only.accepted);
  CHECK(misplaced_report.weights_only.reason == "a record lies outside the archive's folder");
  CHECK_THROWS_AS((void)pthload::open(misplaced.path()), pthload::FormatError);
}

TEST_CASE("scan: safe needs torch's weights-only loader to accept the file") {
  // Nothing here runs code, yet weights_only=True refuses each: unknown, with torch's reason.
  PickleWriter defaultdict;
  defaultdict.global("collections", "defaultdict").mark().global("builtins", "list").tuple();
  const auto refused = checkpoint_file(defaultdict.reduce().stop().bytes());
  const auto report = pthload::scan(refused.path());
  CHECK(report.verdict == Verdict::kUnknown);
  CHECK(!report.weights_only.accepted);
  CHECK(report.weights_only.reason.find("Unsupported global: GLOBAL collections.defaultdict") !=
        std::string::npos);
  CHECK(report.weights_only.where == "ck/data.pkl+0x2");

  // Protocol 4 opcodes, every global allowed: still refused ("Unsupported operand 149", FRAME).
  std::string framed = "\x80\x04\x95";
  const std::string body = "}.";
  for (int i = 0; i < 8; ++i)
    framed += static_cast<char>(i == 0 ? body.size() : 0);
  const auto protocol4 = checkpoint_file(framed + body);
  const auto protocol4_report = pthload::scan(protocol4.path());
  CHECK(protocol4_report.verdict == Verdict::kUnknown);
  CHECK(protocol4_report.weights_only.reason == "Unsupported operand 149");
  CHECK(protocol4_report.findings.empty());
}

TEST_CASE("scan: a name allowed in part is not allowed") {
  for (const auto& [module, name] : {std::pair{"torch._utils", "_rebuild_tensor_v2x"},
                                     std::pair{"torch", "_utils._rebuild_tensor_v2"},
                                     std::pair{"torch._utils.x", "_rebuild_tensor_v2"}}) {
    PickleWriter p;
    p.global(module, name).empty_tuple().reduce().stop();
    const auto file = checkpoint_file(p.bytes());
    const auto report = pthload::scan(file.path());
    CAPTURE(module);
    CAPTURE(name);
    CHECK(report.verdict == Verdict::kUnknown);
    const auto* global = find_global(report, module, name);
    REQUIRE(global != nullptr);
    CHECK(global->verdict == Verdict::kUnknown);
    CHECK(!global->reason.empty());
  }
}

TEST_CASE("scan: a dangerous record decides the verdict whatever the layout") {
  using pthload::test::TempPath;
  using pthload::test::zip_build::build;
  PickleWriter eval;
  eval.global("builtins", "eval").mark().str("1").tuple().reduce().stop();
  // data.pkl at the root: torch refuses the layout, unzip and pickle.load do not.
  const auto root = TempPath(build({{.name = "data.pkl", .data = eval.bytes()}}).bytes);
  const auto report = pthload::scan(root.path());
  CHECK(report.verdict == Verdict::kDangerous);
  CHECK(report.format == "zip");
  CHECK(!report.weights_only.accepted);
  // A zip of no pickle at all is no checkpoint.
  const auto text = TempPath(build({{.name = "a/readme.txt", .data = "hi\n"}}).bytes);
  CHECK(pthload::scan(text.path()).verdict == Verdict::kNotACheckpoint);
}

TEST_CASE("scan: a zip handed to _load_from_bytes is unknown, not silently dropped") {
  using pthload::test::bytes_of;
  using pthload::test::TempPath;
  // torch.storage._load_from_bytes(b'PK\x03\x04...'): torch.load of those bytes reads a zip
  // archive's data.pkl, which scan does not open inside a pickle.
  PickleWriter p;
  p.global("torch.storage", "_load_from_bytes").mark();
  // SHORT_BINBYTES of 8 bytes: the zip magic, then "abcd".
  std::string nested_bytes = "C\x08PK";
  nested_bytes += std::string("\x03\x04", 2) + "abcd";
  p.raw(nested_bytes).tuple().reduce().stop();
  const TempPath file(bytes_of(p.bytes()));
  const auto report = pthload::scan(file.path());
  CHECK(report.verdict == Verdict::kUnknown);
  CHECK(has_finding(report, "a zip archive, whose data.pkl torch.load unpickles"));
}

TEST_CASE("scan: safe only where weights-only loading accepts, whatever the branch") {
  using pthload::test::bytes_of;
  using pthload::test::TempPath;
  // A torch.save zip named .safetensors: torch.load hands the path to safetensors, which
  // cannot read it, so the weights-only answer is no and the verdict cannot be safe.
  const auto zip =
      checkpoint_file(clean_pickle(), {{.name = "ck/data/0", .data = float_record(6)}});
  const TempPath renamed(pthload::test::file_bytes(zip.path()), ".safetensors");
  const auto report = pthload::scan(renamed.path());
  CHECK(!report.weights_only.accepted);
  CHECK(report.verdict == Verdict::kUnknown);
  CHECK(has_finding(report, "torch.load(weights_only=True) refuses the file"));
  // A safetensors file under another name: data only, but torch.load would unpickle it.
  std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  bytes += header + std::string(4, '\0');
  const TempPath misnamed(bytes_of(bytes), ".bin");
  const auto data_only = pthload::scan(misnamed.path());
  CHECK(data_only.format == "safetensors");
  CHECK(data_only.verdict == Verdict::kUnknown);
  const TempPath named(bytes_of(bytes), ".safetensors");
  CHECK(pthload::scan(named.path()).verdict == Verdict::kSafe);
}

TEST_CASE("scan: an archive beyond pthload's limits is unknown, not 'not a checkpoint'") {
  const auto file =
      checkpoint_file(clean_pickle(), {{.name = "ck/data/0", .data = float_record(6)}});
  pthload::Limits limits;
  limits.max_zip_entries = 1;
  const auto report = pthload::scan(file.path(), limits);
  CHECK(report.verdict == Verdict::kUnknown);
  CHECK(report.format == "zip");
  CHECK(has_finding(report, "beyond pthload's limits"));
  CHECK(report.weights_only.accepted);  // torch's reader has no such limit
}

TEST_CASE("scan: Python 2 text strings name a STACK_GLOBAL as Python 3 reads them") {
  const std::string path = "scan_test_string_stack_global.pkl";
  std::ofstream(path, std::ios::binary) << "S'os'\nS'system'\n\x93S'echo'\n\x85R.";
  const auto report = pthload::scan(path);
  std::remove(path.c_str());
  CHECK(report.verdict == Verdict::kDangerous);
  const auto* system = find_global(report, "os", "system");
  REQUIRE(system != nullptr);
  CHECK(system->called);
}

TEST_CASE("scan: a global CPython reads past a frame's end is judged as CPython reads it") {
  // FRAME of 3 bytes "cxx", then "os\ngetcwd\n": pthload reads the GLOBAL xxos.getcwd, the C
  // unpickler drops "xx" and imports os.getcwd.
  std::string pickle = "\x80\x04\x95";
  for (int i = 0; i < 8; ++i)
    pickle += static_cast<char>(i == 0 ? 3 : 0);
  pickle += "cxxos\ngetcwd\n)R.";
  const auto file = checkpoint_file(pickle);
  const auto report = pthload::scan(file.path());
  CHECK(report.verdict == Verdict::kDangerous);
  const auto* as_cpython = find_global(report, "os", "getcwd");
  REQUIRE(as_cpython != nullptr);
  CHECK(as_cpython->where == "ck/data.pkl as CPython reads its frames");
  CHECK(find_global(report, "xxos", "getcwd") != nullptr);
  CHECK(has_finding(report, "reads past the end of its FRAME"));
}

TEST_CASE("RecordReader::verify_all: every record's CRC-32, one problem per bad record") {
  const auto file =
      checkpoint_file(clean_pickle(), {{.name = "ck/data/0", .data = float_record(6)}});
  std::uint64_t read = 0;
  CHECK(pthload::RecordReader::open(file.path())
            .verify_all([&](std::uint64_t n) { read += n; })
            .empty());
  CHECK(read > 24);
  // Flip a byte of the storage record's data (its bytes are unique in the file).
  std::string bytes;
  {
    std::ifstream in(file.path(), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto at = bytes.find(float_record(6));
  REQUIRE(at != std::string::npos);
  bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);
  const std::string corrupt = "scan_test_corrupt.pt";
  std::ofstream(corrupt, std::ios::binary) << bytes;
  const auto problems = pthload::RecordReader::open(corrupt).verify_all();
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].record == "ck/data/0");
  CHECK(problems[0].message.find("CRC-32") != std::string::npos);
  std::remove(corrupt.c_str());
}
