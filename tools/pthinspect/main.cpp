// pthinspect: inspect PyTorch checkpoints from the shell, built on pthload's public API alone.
#include <exception>
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>
#include <pthload/pthload.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"pthinspect: inspect PyTorch checkpoints without PyTorch"};
  app.require_subcommand(1);
  const std::vector<pthinspect::Command> commands{
      pthinspect::add_ls_command(app),      pthinspect::add_load_command(app),
      pthinspect::add_records_command(app), pthinspect::add_cat_command(app),
      pthinspect::add_tree_command(app),    pthinspect::add_globals_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a ParseError that exits 0; every real usage error exits 2, as README says.
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (const auto& command : commands) {
      if (command.cli->parsed()) return command.run();
    }
  } catch (const pthload::Error& e) {
    std::cerr << "pthinspect: error: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "pthinspect: internal error: " << e.what() << '\n';
    return 3;
  }
  return 2;
}
