// `pthinspect cat FILE RECORD`: writes one record's uncompressed bytes to stdout.
#include <cstdio>
#include <memory>
#include <string>

#include <pthload/pthload.hpp>

#include "commands.hpp"

namespace pthinspect {
namespace {

struct CatArgs {
  std::string path;
  std::string record;
  bool verify = false;
};

int run_cat(const CatArgs& args) {
  const auto bytes =
      pthload::RecordReader::open(args.path, {.verify_crc = args.verify}).read(args.record);
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size()) {
    std::fputs("pthinspect: error: writing to stdout failed\n", stderr);
    return 1;
  }
  return 0;
}

}  // namespace

Command add_cat_command(CLI::App& app) {
  auto args = std::make_shared<CatArgs>();
  auto* cmd = app.add_subcommand("cat", "Write one record's bytes to stdout (e.g. model/version)");
  cmd->add_option("file", args->path, "checkpoint")->required();
  cmd->add_option("record", args->record, "the record's full name, as `records` lists it")
      ->required();
  cmd->add_flag("--verify", args->verify, "check the record's CRC-32");
  return {cmd, [args] { return run_cat(*args); }};
}

}  // namespace pthinspect
