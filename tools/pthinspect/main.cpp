// pthinspect: inspect PyTorch checkpoints from the shell, built on pthload's public API alone.
#include <exception>
#include <iostream>
#include <new>
#include <vector>

#include <CLI/CLI.hpp>
#include <pthload/pthload.hpp>

#include "commands.hpp"
#include "files.hpp"

namespace {

constexpr const char* kExitCodes = R"(Exit status:
  0  success (diff: equal; scan: every file safe; verify: no problem)
  1  error: the file could not be read, or a problem was found (verify); diff: the files
     differ; scan: a file holds globals pthload keeps opaque (unknown)
  2  usage error; diff: trouble reading a file; scan: a file is dangerous
  3  scan: a file is not a checkpoint at all; any command: internal error
  4  globals --fail-on-opaque: an opaque global was found
  5  any command: memory ran out (host memory, or device memory for a GPU load); the
     message names what was being read or placed and how many bytes)";

// Host memory (OutOfMemoryError, or a bad_alloc in pthinspect itself) or device memory.
bool is_out_of_memory(const pthload::Error& e) {
  return dynamic_cast<const pthload::OutOfMemoryError*>(&e) != nullptr ||
         e.code() == pthload::Errc::kDeviceAllocationFailed;
}

constexpr int kOutOfMemoryStatus = 5;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pthinspect: inspect PyTorch checkpoints without PyTorch"};
  app.footer(kExitCodes);
  app.require_subcommand(1);
  const std::vector<pthinspect::Command> commands{
      pthinspect::add_ls_command(app),      pthinspect::add_load_command(app),
      pthinspect::add_records_command(app), pthinspect::add_cat_command(app),
      pthinspect::add_tree_command(app),    pthinspect::add_globals_command(app),
      pthinspect::add_scan_command(app),    pthinspect::add_stat_command(app),
      pthinspect::add_diff_command(app),    pthinspect::add_export_command(app),
      pthinspect::add_verify_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a ParseError that exits 0; every real usage error exits 2, as docs/pthinspect.md
    // says.
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (const auto& command : commands) {
    if (!command.cli->parsed()) continue;
    try {
      return command.run();
    } catch (const pthload::Error& e) {
      std::cerr << "pthinspect: error: " << e.what() << '\n';
      return is_out_of_memory(e) ? kOutOfMemoryStatus : command.error_status;
    } catch (const pthinspect::CliError& e) {
      std::cerr << "pthinspect: error: " << e.what() << '\n';
      return command.error_status;
    } catch (const std::bad_alloc&) {
      std::cerr << "pthinspect: error: out of memory\n";
      return kOutOfMemoryStatus;
    } catch (const std::exception& e) {
      std::cerr << "pthinspect: internal error: " << e.what() << '\n';
      return 3;
    }
  }
  return 2;
}
