// The options `ls` and `load` share for choosing tensors: --only, --exclude, --select,
// --rename-prefix (LoadOptions::filter, a pthload::TensorFilter).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <pthload/pthload.hpp>

namespace pthinspect {

struct ChooseArgs {
  std::vector<std::string> only;
  std::vector<std::string> exclude;
  std::string select;
  std::vector<std::string> rename_prefix;  // FROM=TO
};

/// Adds --only, --exclude, --select and --rename-prefix to `cmd`, filling `args` (a
/// --rename-prefix without '=' is a usage error when parsed).
void add_choose_options(CLI::App& cmd, ChooseArgs& args);

/// Sets `options.filter`'s select, rename_prefix, only and exclude from `args`.
void apply_choose_options(const ChooseArgs& args, pthload::LoadOptions& options);

}  // namespace pthinspect
