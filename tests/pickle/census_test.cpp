// The opcode census (census.hpp) and the machine's audit hook (RunOptions::on_global_or_call):
// what scan() reads of a pickle besides its result.
#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "pickle/census.hpp"
#include "pickle/machine.hpp"
#include "pickle/opcodes.hpp"
#include "pickle_test_support.hpp"

using namespace std::literals;
using pthload::pickle::Kind;
using pthload::pickle::Machine;
using pthload::pickle::Opcode;
using pthload::pickle::opcode_census;
using pthload::pickle::RunOptions;
using pthload::pickle::Value;

namespace {

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::size_t count(const pthload::pickle::OpcodeCensus& census, Opcode op) {
  return census.counts[static_cast<std::uint8_t>(op)];
}

// "module.name" of every global and "call module.name" of every call the run made, in order.
std::vector<std::string> audit(std::string_view pickle) {
  std::vector<std::string> seen;
  RunOptions options;
  options.allow_trailing_bytes = true;
  options.on_global_or_call = [&](const Value& value) {
    if (value.is(Kind::kGlobal)) {
      seen.push_back(std::string(value.module()) + "." + std::string(value.name()));
    } else if (value.callable().is(Kind::kGlobal)) {
      seen.push_back("call " + std::string(value.callable().module()) + "." +
                     std::string(value.callable().name()));
    } else {
      seen.push_back("call <computed>");
    }
  };
  Machine machine;
  try {
    (void)machine.run(bytes_of(pickle), options);
  } catch (const pthload::Error&) {
    seen.push_back("error");
  }
  return seen;
}

}  // namespace

TEST_CASE("pickle census: counts every opcode up to STOP, skipping arguments of every encoding") {
  // GLOBAL's two lines, BINUNICODE's length, BININT1, TUPLE1, REDUCE, BINPUT, STOP; then junk.
  const auto census =
      opcode_census(bytes_of("\x80\x02"
                             "cos\nsystem\nq\x00X\x02\x00\x00\x00hi\x85R0K\x05.junk"sv));
  CHECK(census.complete);
  CHECK(census.end_offset == 28);
  CHECK(count(census, Opcode::kProto) == 1);
  CHECK(count(census, Opcode::kGlobal) == 1);
  CHECK(count(census, Opcode::kBinUnicode) == 1);
  CHECK(count(census, Opcode::kReduce) == 1);
  CHECK(count(census, Opcode::kPop) == 1);
  CHECK(count(census, Opcode::kBinInt1) == 1);
  // 'j', 'u', 'n', 'k' after STOP are not counted.
  CHECK(count(census, Opcode::kLongBinGet) == 0);
}

TEST_CASE(
    "pickle census: an argument running past the end, or a byte that is no opcode, stops it") {
  const auto truncated = opcode_census(bytes_of("\x80\x02X\xff\x00\x00\x00ab"sv));
  CHECK_FALSE(truncated.complete);
  CHECK(count(truncated, Opcode::kBinUnicode) == 1);
  const auto unknown = opcode_census(bytes_of("\x80\x02\xff."sv));
  CHECK_FALSE(unknown.complete);
  CHECK(unknown.counts[0xff] == 1);
  CHECK(count(unknown, Opcode::kStop) == 0);
  // A text pickle: INST's two lines, then STOP.
  const auto text = opcode_census(bytes_of("(S'x'\nios\nsystem\n."sv));
  CHECK(text.complete);
  CHECK(count(text, Opcode::kInst) == 1);
  CHECK(count(text, Opcode::kString) == 1);
}

TEST_CASE("pickle audit hook: sees globals and calls the result no longer reaches") {
  // os.system('x') is called, its result popped; the root is an empty dict.
  CHECK(audit("\x80\x02"
              "cos\nsystem\nX\x01\x00\x00\x00x\x85R0}."sv) ==
        std::vector<std::string>{"os.system", "call os.system"});
}

TEST_CASE("pickle audit hook: STACK_GLOBAL from memoised strings, INST, OBJ and NEWOBJ_EX") {
  CHECK(audit("\x80\x04\x8c\x02os\x94"
              "0\x8c\x06system\x94"
              "0h\x00h\x01\x93)R."sv) == std::vector<std::string>{"os.system", "call os.system"});
  CHECK(audit("(S'x'\nios\nsystem\n."sv) ==
        std::vector<std::string>{"os.system", "call os.system"});
  CHECK(audit("\x80\x02(cos\nsystem\nS'x'\no."sv) ==
        std::vector<std::string>{"os.system", "call os.system"});
  CHECK(audit("\x80\x04"
              "csubprocess\nPopen\n)}\x92."sv) ==
        std::vector<std::string>{"subprocess.Popen", "call subprocess.Popen"});
}

TEST_CASE("pickle audit hook: what ran before an error is still reported") {
  CHECK(audit("\x80\x02"
              "cos\nsystem\n)R\xff"sv) ==
        std::vector<std::string>{"os.system", "call os.system", "error"});
}

TEST_CASE("pickle audit hook: STACK_GLOBAL from Python 2 strings, as Python 3 reads them") {
  // STRING opcodes decode to str under torch.load (encoding 'utf-8'): they name a global.
  CHECK(audit("S'os'\nS'system'\n\x93S'echo'\n\x85R.") ==
        std::vector<std::string>{"os.system", "call os.system"});
  // Bytes that are no UTF-8 make no str: the machine refuses the STACK_GLOBAL as Python does.
  CHECK(audit("U\x02\xff\xfeU\x01x\x93.") == std::vector<std::string>{"error"});
}

TEST_CASE("pickle audit hook: BUILD is reported with its target, whatever it is") {
  std::vector<std::string> targets;
  RunOptions options;
  options.on_build = [&](const Value& target, const Value& state) {
    targets.push_back(std::string(pthload::pickle::kind_name(target.kind())) + " <- " +
                      std::string(pthload::pickle::kind_name(state.kind())));
  };
  Machine machine;
  // A BUILD on a global (the class itself): the machine refuses it after the hook saw it.
  CHECK_THROWS_AS((void)machine.run(bytes_of("\x80\x02\x63"
                                             "argparse\nNamespace\n}b."),
                                    options),
                  pthload::FormatError);
  (void)machine.run(bytes_of("\x80\x02]}b."), options);
  CHECK(targets == std::vector<std::string>{"global <- dict", "list <- dict"});
}

TEST_CASE("pickle census: opcode_starts lists where each opcode begins") {
  const auto starts = pthload::pickle::opcode_starts(bytes_of("\x80\x02K\x05\x85."));
  CHECK(starts == std::vector<std::size_t>{0, 2, 4, 5});
  // Where reading stops at a byte that is no opcode, that byte is the last start.
  CHECK(pthload::pickle::opcode_starts(bytes_of("N\xff")) == std::vector<std::size_t>{0, 1});
}
