// `pthinspect globals FILE`: every Python global the checkpoint's pickle names, and whether
// pthload interprets it or keeps it opaque — what torch.load would import and call.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pthload/pthload.hpp>

#include "commands.hpp"

namespace pthinspect {
namespace {

// An audit gate for scripts: 0 means every global is one pthload understands.
constexpr int kExitOpaqueGlobals = 4;

struct GlobalsArgs {
  std::string path;
  bool json = false;
  bool fail_on_opaque = false;
};

int run_globals(const GlobalsArgs& args) {
  const auto checkpoint = pthload::open(args.path);
  const auto globals = pthload::referenced_globals(checkpoint);
  const auto opaque = std::count_if(globals.begin(), globals.end(),
                                    [](const auto& global) { return !global.interpreted; });
  if (args.json) {
    auto list = nlohmann::json::array();
    for (const auto& global : globals) {
      list.push_back(
          {{"module", global.module}, {"name", global.name}, {"interpreted", global.interpreted}});
    }
    std::cout << nlohmann::json{{"globals", list}, {"opaque", opaque}}.dump(2) << '\n';
  } else {
    for (const auto& global : globals) {
      std::cout << fmt::format("{:<11}  {}.{}\n", global.interpreted ? "interpreted" : "OPAQUE",
                               global.module, global.name);
    }
    std::cout << fmt::format("{} globals, {} opaque (kept as objects, never called){}\n",
                             globals.size(), opaque,
                             opaque > 0 ? "; torch.load would import and call them" : "");
  }
  return args.fail_on_opaque && opaque > 0 ? kExitOpaqueGlobals : 0;
}

}  // namespace

Command add_globals_command(CLI::App& app) {
  auto args = std::make_shared<GlobalsArgs>();
  auto* cmd = app.add_subcommand(
      "globals", "List the Python globals the pickle names: interpreted, or opaque and never run");
  cmd->add_option("file", args->path, "checkpoint (.pt, .pth, .bin, .ckpt)")->required();
  cmd->add_flag("--json", args->json, "print JSON instead of a list");
  cmd->add_flag("--fail-on-opaque", args->fail_on_opaque,
                "exit 4 when a global is opaque (for audit scripts)");
  return {cmd, [args] { return run_globals(*args); }};
}

}  // namespace pthinspect
