// torchscript_calls(): the calls TorchScript code makes, strings and comments aside.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "audit/torchscript_code.hpp"

namespace {

pthload::audit::CodeCalls calls_of(std::string_view code) {
  return pthload::audit::torchscript_calls(std::as_bytes(std::span(code.data(), code.size())));
}

bool has(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("torchscript code: calls, methods, definitions and keywords") {
  const auto calls = calls_of(
      "class Net(Module):\n"
      "  def forward(self: __torch__.Net, x: Tensor) -> Tensor:\n"
      "    _0 = (self.lin).forward(x, )\n"
      "    if torch.eq(torch.dim(x), 2):\n"
      "      ops.prim.RaiseException(\"bad\", \"builtins.ValueError\")\n"
      "    return torch.mul(_0, 2)\n");
  CHECK(has(calls.calls, "torch.mul"));
  CHECK(has(calls.calls, "torch.dim"));
  CHECK(has(calls.calls, ".forward"));
  CHECK(has(calls.calls, "ops.prim.RaiseException"));
  CHECK(!has(calls.calls, "forward"));  // a definition
  CHECK(!has(calls.calls, "Net"));
  CHECK(!has(calls.calls, "if"));
  CHECK(calls.dangerous.empty());
  CHECK(!calls.defines_setstate);
}

TEST_CASE("torchscript code: file, storage-sharing and RPC calls are dangerous") {
  const auto calls = calls_of(
      "  def __setstate__(self: __torch__.Net, state: Tuple[int]) -> None:\n"
      "    _0 = torch.from_file(\"/tmp/x\", True, 8)\n"
      "    _1 = (_0).untyped_storage()._share_filename_()\n"
      "    torch.save(_0, \"/tmp/y\")\n"
      "    return None\n");
  CHECK(calls.defines_setstate);
  CHECK(has(calls.dangerous, "torch.from_file"));
  CHECK(has(calls.dangerous, "._share_filename_"));
  CHECK(has(calls.dangerous, "torch.save"));
}

TEST_CASE("torchscript code: names inside strings and comments are no calls") {
  const auto calls = calls_of(
      "  # torch.from_file(\"x\") would be bad\n"
      "  _0 = \"torch.from_file(1)\"\n"
      "  _1 = '''torch.save(x)\n torch.load(y)'''\n"
      "  _2 = \"escaped \\\" torch.from_file(2)\"\n"
      "  return torch.add(x, 1)\n");
  CHECK(calls.dangerous.empty());
  CHECK(calls.calls == std::vector<std::string>{"torch.add"});
  const std::string bytecode(
      "\x80\x02X\x0f\x00\x00\x00"
      "aten::from_file",
      22);
  const auto operators = pthload::audit::dangerous_operator_names(
      std::as_bytes(std::span(bytecode.data(), bytecode.size())));
  CHECK(operators == std::vector<std::string>{"aten::from_file"});
}
