// `pthinspect load FILE`: a real load through the library, as an embedding runtime does it;
// prints where the storages went and how long it took.

#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <pthload/pthload.hpp>

#include "choose.hpp"
#include "commands.hpp"
#include "io_option.hpp"
#include "output.hpp"

namespace pthinspect {
namespace {

struct LoadArgs {
  std::string path;
  std::string map_location;
  bool copy = false;
  ChooseArgs choose;
  std::string io = "map";
};

// "cpu" or "cuda:0": every storage there; "cuda:1=cuda:0,cuda:2=cpu": tags renamed.
pthload::MapLocation parse_map_location(std::string_view spec) {
  if (spec.find('=') == std::string_view::npos) return pthload::map_to(spec);
  std::map<std::string, std::string> renames;
  while (!spec.empty()) {
    const auto comma = spec.find(',');
    const std::string_view pair = spec.substr(0, comma);
    const auto equals = pair.find('=');
    if (equals == std::string_view::npos || equals == 0 || equals + 1 == pair.size()) {
      throw pthload::FormatError(
          pthload::Errc::kDeviceBadString,
          fmt::format("--map-location: '{}' is not TAG=DEVICE (e.g. cuda:1=cuda:0)", pair));
    }
    renames.emplace(std::string(pair.substr(0, equals)), std::string(pair.substr(equals + 1)));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
  }
  return pthload::map_dict(std::move(renames));
}

// pthinspect's progress bar (output.hpp: bytes, rate, time left, only on a terminal) fed by
// the library's progress callback, which pthload's copy threads may call concurrently.
std::function<void(std::uint64_t, std::uint64_t)> progress_bar() {
  struct State {
    std::mutex mutex;
    std::unique_ptr<Progress> bar;
    std::uint64_t placed = 0;
  };
  auto state = std::make_shared<State>();
  return [state](std::uint64_t placed, std::uint64_t total) {
    const std::lock_guard lock(state->mutex);
    if (!state->bar) state->bar = std::make_unique<Progress>("load", total);
    if (placed > state->placed) {
      state->bar->advance(placed - state->placed);
      state->placed = placed;
    }
  };
}

// The library speaks of map_location; here the user wrote --map-location.
bool names_map_location(pthload::Errc code) {
  return code == pthload::Errc::kDeviceCudaUnavailable ||
         code == pthload::Errc::kDeviceOrdinalOutOfRange;
}

int run_load(const LoadArgs& args) {
  pthload::LoadOptions options{.copy_cpu_storages = args.copy};
  apply_choose_options(args.choose, options);
  options.io = io_strategy(args.io);
  if (!args.map_location.empty()) options.map_location = parse_map_location(args.map_location);
  options.cuda.progress = progress_bar();
  const auto start = std::chrono::steady_clock::now();
  std::optional<pthload::Checkpoint> loaded;
  try {
    loaded.emplace(pthload::load(args.path, options));
  } catch (const pthload::DeviceError& e) {
    if (!names_map_location(e.code())) throw;
    throw pthload::DeviceError(e.code(), e.message() + " (pthinspect: --map-location cpu, or auto)",
                               e.context());
  }
  const pthload::Checkpoint& checkpoint = *loaded;
  const auto elapsed = std::chrono::steady_clock::now() - start;

  std::map<std::string, std::pair<std::size_t, std::uint64_t>> per_device;
  std::size_t views = 0;
  for (const auto& storage : checkpoint.storages()) {
    auto& [count, bytes] = per_device[storage->device().to_string()];
    ++count;
    bytes += storage->nbytes();
    views += storage->is_file_view() ? 1 : 0;
  }
  std::cout << fmt::format("loaded {} tensors in {} storages in {:.3f} ms\n",
                           checkpoint.tensors().size(), checkpoint.storages().size(),
                           std::chrono::duration<double, std::milli>(elapsed).count());
  for (const auto& [device, totals] : per_device) {
    std::cout << fmt::format("  {:<8} {:>6} storages  {:>12}\n", device, totals.first,
                             human_bytes(totals.second));
  }
  if (views > 0)
    std::cout << fmt::format("  {} CPU storages are zero-copy views of the file\n", views);
  return 0;
}

}  // namespace

Command add_load_command(CLI::App& app) {
  auto args = std::make_shared<LoadArgs>();
  auto* cmd = app.add_subcommand("load", "Load a checkpoint and report where its storages went");
  cmd->add_option("file", args->path, "checkpoint")->required();
  cmd->add_option("--map-location", args->map_location,
                  "cpu | cuda:N | meta | auto (the first GPU, else the CPU), or tag renames "
                  "TAG=DEVICE[,TAG=DEVICE...]");
  cmd->add_flag("--copy", args->copy, "CPU storages as owned copies instead of file views");
  add_choose_options(*cmd, args->choose);
  add_io_option(*cmd, args->io);
  return {cmd, [args] { return run_load(*args); }};
}

}  // namespace pthinspect
