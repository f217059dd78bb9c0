// pthinspect's subcommands: each registers its options on the CLI and runs when chosen.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace pthinspect {

/// A registered subcommand and what runs when it is chosen (returns the exit status).
struct Command {
  CLI::App* cli;
  std::function<int()> run;
  /// The exit status when it fails with an error (diff and scan give 1 another meaning).
  int error_status = 1;
};

Command add_ls_command(CLI::App& app);
Command add_load_command(CLI::App& app);
Command add_records_command(CLI::App& app);
Command add_cat_command(CLI::App& app);
Command add_tree_command(CLI::App& app);
Command add_globals_command(CLI::App& app);
Command add_export_command(CLI::App& app);
Command add_stat_command(CLI::App& app);
Command add_diff_command(CLI::App& app);
Command add_verify_command(CLI::App& app);
Command add_scan_command(CLI::App& app);

}  // namespace pthinspect
