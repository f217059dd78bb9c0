// `pthinspect records FILE`: the zip records of a checkpoint, optionally with CRC checks.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pthload/pthload.hpp>

#include "commands.hpp"
#include "output.hpp"

namespace pthinspect {
namespace {

struct RecordsArgs {
  std::string path;
  bool json = false;
  bool verify = false;
};

int run_records(const RecordsArgs& args) {
  // One mapping and one central directory parse for the listing and every CRC check.
  const auto reader = pthload::RecordReader::open(args.path);
  const auto records = reader.list();
  if (args.verify) {
    for (const auto& r : records)
      reader.verify_crc(r.name);
  }
  if (args.json) {
    auto list = nlohmann::json::array();
    for (const auto& r : records) {
      list.push_back({{"name", r.name},
                      {"offset", r.payload_offset},
                      {"size", r.size},
                      {"compressed_size", r.compressed_size},
                      {"crc32", fmt::format("{:08x}", r.crc32)},
                      {"compressed", r.is_compressed}});
    }
    nlohmann::json out{{"format", "zip"}, {"records", list}};
    if (args.verify) out["crc_verified"] = true;
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  std::size_t name_width = 4;
  for (const auto& r : records)
    name_width = std::max(name_width, r.name.size());
  std::cout << fmt::format("{:<{}}  {:>12}  {:>10}  {:>8}  {}\n", "name", name_width, "offset",
                           "size", "crc32", "method");
  std::uint64_t total = 0;
  for (const auto& r : records) {
    std::cout << fmt::format("{:<{}}  {:>12}  {:>10}  {:08x}  {}\n", r.name, name_width,
                             r.payload_offset, human_bytes(r.size), r.crc32,
                             r.is_compressed ? "deflated" : "stored");
    total += r.size;
  }
  std::cout << fmt::format("{} records, {} uncompressed{}\n", records.size(), human_bytes(total),
                           args.verify ? ", every CRC-32 verified" : "");
  return 0;
}

}  // namespace

Command add_records_command(CLI::App& app) {
  auto args = std::make_shared<RecordsArgs>();
  auto* cmd = app.add_subcommand("records", "List the zip records of a checkpoint");
  cmd->add_option("file", args->path, "checkpoint (.pt, .pth, .bin, .ckpt)")->required();
  cmd->add_flag("--json", args->json, "print JSON instead of a table");
  cmd->add_flag("--verify", args->verify, "read every record and check its CRC-32");
  return {cmd, [args] { return run_records(*args); }};
}

}  // namespace pthinspect
