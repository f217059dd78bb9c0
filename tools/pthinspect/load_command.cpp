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
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
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
  unsigned copy_threads = 0;   // 0: the library's default
  unsigned parse_threads = 0;  // 0: the library's default
  ChooseArgs choose;
  std::string io = "map";
  std::vector<std::string> slices;  // NAME:DIM:BEGIN:END
};

struct SliceSpec {
  std::string name;
  int dim = 0;
  std::optional<std::int64_t> begin;  // empty: from the start
  std::optional<std::int64_t> end;    // empty: to the end
};

// "NAME:DIM:BEGIN:END", split at the last three colons (a name may hold colons); BEGIN and END
// may be empty (Python's t[:5], t[2:]) or negative (from the end). Returns an error text, or
// empty.
std::string parse_slice(const std::string& text, SliceSpec& spec) {
  std::size_t cut = text.size();
  std::string fields[3];
  for (int i = 2; i >= 0; --i) {
    const auto colon = cut == 0 ? std::string::npos : text.rfind(':', cut - 1);
    if (colon == std::string::npos) return "'" + text + "' is not NAME:DIM:BEGIN:END";
    fields[i] = text.substr(colon + 1, cut - colon - 1);
    cut = colon;
  }
  spec.name = text.substr(0, cut);
  const auto number = [&](const std::string& field, const char* what,
                          std::optional<std::int64_t>& out) -> std::string {
    if (field.empty()) return {};
    std::size_t used = 0;
    try {
      out = std::stoll(field, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != field.size())
      return fmt::format("'{}': {} '{}' is not an integer", text, what, field);
    return {};
  };
  std::optional<std::int64_t> dim;
  if (spec.name.empty()) return "'" + text + "' names no tensor";
  if (fields[0].empty()) return "'" + text + "' gives no DIM";
  for (const auto& error : {number(fields[0], "DIM", dim), number(fields[1], "BEGIN", spec.begin),
                            number(fields[2], "END", spec.end)}) {
    if (!error.empty()) return error;
  }
  if (*dim < -64 || *dim > 64) return fmt::format("'{}': DIM {} is out of range", text, *dim);
  spec.dim = static_cast<int>(*dim);
  return {};
}

// --slice: each slice read alone from the opened checkpoint (pthload::load_slice) and placed
// on the device --map-location names (the CPU by default); prints its shape and checksum.
int run_slices(const LoadArgs& args, const pthload::LoadOptions& options) {
  pthload::Device device = pthload::Device::cpu();
  if (args.map_location == "auto") {
    device = pthload::auto_device();  // as for a whole load: the first GPU, else the CPU
  } else if (!args.map_location.empty()) {
    if (args.map_location.find('=') != std::string::npos) {
      throw pthload::FormatError(pthload::Errc::kDeviceBadString,
                                 "--slice places slices on one device: --map-location DEVICE");
    }
    device = pthload::Device::parse(args.map_location);
  }
  const auto checkpoint = pthload::open(args.path, options);
  for (const auto& text : args.slices) {
    SliceSpec spec;
    parse_slice(text, spec);  // checked when parsed
    const auto& whole = checkpoint.tensor(spec.name);
    const auto rank = static_cast<int>(whole.dim());
    const int axis = spec.dim < 0 ? spec.dim + rank : spec.dim;
    const std::int64_t extent =
        axis >= 0 && axis < rank ? whole.sizes()[static_cast<std::size_t>(axis)] : 0;
    const auto begin = spec.begin.value_or(0);
    const auto end = spec.end.value_or(extent);
    const auto start = std::chrono::steady_clock::now();
    const auto slice =
        pthload::load_slice(checkpoint, spec.name, spec.dim, begin, end, device, options.cuda);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    std::cout << fmt::format(
        "slice {} dim {} [{}, {}): {} [{}] on {}, {} in {:.3f} ms, xxh3 {:016x}\n", spec.name,
        spec.dim, begin, end, pthload::dtype_name(slice.dtype()), fmt::join(slice.sizes(), ", "),
        slice.device().to_string(), human_bytes(slice.nbytes()),
        std::chrono::duration<double, std::milli>(elapsed).count(),
        slice.device().type == pthload::Device::Type::kCpu ? slice.content_checksum() : 0);
  }
  return 0;
}

// "cpu" or "cuda:0": every storage there; "cuda:1=cuda:0,cuda:2=cpu": tags renamed.
pthload::MapLocation parse_map_location(std::string_view spec) {
  if (spec.find('=') == std::string_view::npos) return pthload::map_to(spec);
  std::map<std::string, std::string> renames;
  // Every comma separates two pairs: an empty part, last ones included ("cpu=meta,"), is an
  // error as the first one is, not a pair left out.
  for (bool more = true; more;) {
    const auto comma = spec.find(',');
    const std::string_view pair = spec.substr(0, comma);
    const auto equals = pair.find('=');
    if (equals == std::string_view::npos || equals == 0 || equals + 1 == pair.size()) {
      throw pthload::FormatError(
          pthload::Errc::kDeviceBadString,
          fmt::format("--map-location: '{}' is not TAG=DEVICE (e.g. cuda:1=cuda:0)", pair));
    }
    const std::string tag(pair.substr(0, equals));
    // A dict has one device per tag; which of two would win is a guess the user did not make.
    if (!renames.emplace(tag, std::string(pair.substr(equals + 1))).second) {
      throw pthload::FormatError(
          pthload::Errc::kDeviceBadString,
          fmt::format("--map-location: tag '{}' is mapped twice ('{}={}' and '{}')", tag, tag,
                      renames[tag], pair));
    }
    more = comma != std::string_view::npos;
    if (more) spec = spec.substr(comma + 1);
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
  options.copy_threads = args.copy_threads;
  options.parse_threads = args.parse_threads;
  if (!args.map_location.empty()) options.map_location = parse_map_location(args.map_location);
  options.cuda.progress = progress_bar();
  if (!args.slices.empty()) return run_slices(args, options);
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
                  "TAG=DEVICE[,TAG=DEVICE...] (each TAG once)");
  cmd->add_flag("--copy", args->copy, "CPU storages as owned copies instead of file views");
  cmd->add_option("--copy-threads", args->copy_threads,
                  "threads reading those copies when they total 32 MiB or more (default: up to "
                  "8, one per hardware thread; 1: the loading thread alone)")
      ->check(CLI::Range(1u, 256u));
  cmd->add_option("--parse-threads", args->parse_threads,
                  "threads reading a pickle of 256 KiB or more: 2 rebuild its tensors while it "
                  "runs (the default on a machine with more than one hardware thread), 1 after")
      ->check(CLI::Range(1u, 2u));
  add_choose_options(*cmd, args->choose);
  add_io_option(*cmd, args->io);
  cmd->add_option("--slice", args->slices,
                  "instead of loading the checkpoint, read only the range [BEGIN, END) of tensor "
                  "NAME along dimension DIM (0 or -1) and print its checksum (load_slice); BEGIN "
                  "or END may be empty or negative, as in Python (repeatable)")
      ->type_name("NAME:DIM:BEGIN:END")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check([](const std::string& text) {
        SliceSpec spec;
        return parse_slice(text, spec);
      });
  return {cmd, [args] { return run_load(*args); }};
}

}  // namespace pthinspect
