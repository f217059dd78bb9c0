// `pthinspect tree FILE`: the checkpoint's object tree, as pickled, for reading and auditing.
#include <cstddef>
#include <iostream>
#include <memory>
#include <string>

#include <pthload/pthload.hpp>

#include "commands.hpp"

namespace pthinspect {
namespace {

struct TreeArgs {
  std::string path;
  pthload::TreeOptions options;
};

int run_tree(const TreeArgs& args) {
  const auto checkpoint = pthload::open(args.path);
  pthload::object_tree(std::cout, checkpoint, args.options);
  std::cout << '\n';
  return 0;
}

}  // namespace

Command add_tree_command(CLI::App& app) {
  auto args = std::make_shared<TreeArgs>();
  auto* cmd = app.add_subcommand(
      "tree", "Print the object tree as pickled (rebuild calls, unknown globals), running nothing");
  cmd->add_option("file", args->path, "checkpoint (.pt, .pth, .bin, .ckpt)")->required();
  cmd->add_option("--depth", args->options.max_depth, "containers deeper than this print as ...")
      ->capture_default_str();
  cmd->add_option("--items", args->options.max_items, "elements shown per container");
  cmd->add_option("--string", args->options.max_string, "bytes shown of a string or bytes value")
      ->capture_default_str();
  return {cmd, [args] { return run_tree(*args); }};
}

}  // namespace pthinspect
