// `pthinspect stat FILE [NAME...]`: per tensor min, max, mean, std and the counts of NaN, ±Inf
// and zeros, for every numeric dtype (complex ones by magnitude), in one streaming pass.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <pthload/pthload.hpp>

#include "commands.hpp"
#include "elements.hpp"
#include "json_layout.hpp"
#include "output.hpp"
#include "values.hpp"

namespace pthinspect {
namespace {

struct StatArgs {
  std::string path;
  std::vector<std::string> names;
  bool json = false;
};

// Min, max, mean and std over the finite values; NaN and ±Inf are counted, not averaged. The
// finite values are gathered a block at a time, each block's mean and sum of squared deviations
// taken apart and merged into the running ones (Chan, Golub and LeVeque's update): as stable as
// Welford's one-pass update, without its division per element, which made `stat` of a 1 GB
// checkpoint take 4 s.
class Stats {
 public:
  // `block` is scratch the caller keeps from one tensor to the next: 100 000 small tensors then
  // allocate nothing each.
  explicit Stats(std::vector<double>& block) : block_(block) { block_.clear(); }

  std::uint64_t count = 0;
  std::uint64_t finite = 0;
  std::uint64_t nan = 0;
  std::uint64_t pos_inf = 0;
  std::uint64_t neg_inf = 0;
  std::uint64_t zeros = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double mean = 0;

  void add(double re, double im, bool complex) {
    ++count;
    if (std::isnan(re) || std::isnan(im)) {
      ++nan;
      return;
    }
    if (std::isinf(re) || std::isinf(im)) {
      // A complex infinity has no sign: counted as +Inf (its magnitude).
      ++((!complex && re < 0) ? neg_inf : pos_inf);
      return;
    }
    block_.push_back(complex ? std::hypot(re, im) : re);
    if (block_.size() == kBlockValues) merge_block();
  }

  // Takes in the values gathered since the last call; call before reading the results.
  void finish() { merge_block(); }

  // The population standard deviation, as torch.std(unbiased=False).
  [[nodiscard]] double std_dev() const { return finite > 0 ? std::sqrt(m2_ / finite) : 0.0; }

 private:
  // Small enough that a block's plain sum loses nothing a display shows, large enough that the
  // merge's division is rare.
  static constexpr std::size_t kBlockValues = 4096;

  void merge_block() {
    if (block_.empty()) return;
    double sum = 0;
    for (const double v : block_) {
      sum += v;
      min = std::min(min, v);
      max = std::max(max, v);
      zeros += v == 0 ? 1 : 0;
    }
    const auto n = static_cast<double>(block_.size());
    const double block_mean = sum / n;
    double block_m2 = 0;
    for (const double v : block_)
      block_m2 += (v - block_mean) * (v - block_mean);
    const auto before = static_cast<double>(finite);
    finite += block_.size();
    const double delta = block_mean - mean;
    const double total = before + n;
    mean += delta * (n / total);
    m2_ += block_m2 + delta * delta * (before * n / total);
    block_.clear();
  }

  double m2_ = 0;
  std::vector<double>& block_;
};

nlohmann::json number_or_null(bool present, double value) {
  return present && std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
}

int run_stat(const StatArgs& args) {
  const pthload::Checkpoint checkpoint =
      pthload::load(args.path, {.map_location = pthload::map_to("cpu")});
  std::vector<const pthload::NamedTensor*> chosen;
  if (args.names.empty()) {
    for (const auto& named : checkpoint.tensors())
      chosen.push_back(&named);
  } else {
    for (const auto& name : args.names) {
      (void)checkpoint.tensor(name);  // throws kTorchNameNotFound naming it
      for (const auto& named : checkpoint.tensors())
        if (named.name == name) chosen.push_back(&named);
    }
  }
  std::uint64_t total = 0;
  for (const auto* named : chosen)
    if (unreadable_reason(named->tensor).empty()) total += named->tensor.nbytes();

  Progress progress("stat", total);
  // Each entry's text, not a tree of them: 100 000 tensors' entries took 157 MB as json objects.
  // The document is written once every tensor is read, so an error leaves stdout empty.
  std::vector<std::string> entries;
  std::size_t width = 4;
  for (const auto* named : chosen)
    width = std::max(width, named->name.size());
  if (!args.json) {
    std::cout << fmt::format(
        "{:<{}}  {:<10}  {:>12}  {:>12}  {:>12}  {:>12}  {:>6}  {:>6}  {:>6}  "
        "{:>8}\n",
        "name", width, "dtype", "min", "max", "mean", "std", "nan", "+inf", "-inf", "zeros");
  }
  std::vector<double> block;
  for (const auto* named : chosen) {
    const pthload::Tensor& t = named->tensor;
    const std::string display = named->name.empty() ? "(root)" : named->name;
    std::string reason = unreadable_reason(t);
    if (reason.empty() && !is_numeric(t.dtype()))
      reason = fmt::format("dtype {} has no numeric values", pthload::dtype_name(t.dtype()));
    if (!reason.empty()) {
      progress.clear();
      if (args.json) {
        entries.push_back(indented(
            {{"name", named->name}, {"dtype", pthload::dtype_name(t.dtype())}, {"skipped", reason}},
            2));
      } else {
        std::cout << fmt::format("{:<{}}  {:<10}  ({})\n", display, width,
                                 pthload::dtype_name(t.dtype()), reason);
      }
      continue;
    }
    Stats stats(block);
    const bool complex = is_complex(t.dtype());
    ElementReader reader(t, named->name);
    for (auto chunk = reader.next(); !chunk.empty(); chunk = reader.next()) {
      for_each_value(t.dtype(), chunk, [&](double re, double im) { stats.add(re, im, complex); });
      progress.advance(chunk.size());
    }
    stats.finish();
    const bool any = stats.finite > 0;
    progress.clear();
    if (args.json) {
      const auto sizes = t.sizes();
      nlohmann::json entry{{"name", named->name},
                           {"dtype", pthload::dtype_name(t.dtype())},
                           {"shape", std::vector<std::int64_t>(sizes.begin(), sizes.end())},
                           {"count", stats.count},
                           {"min", number_or_null(any, stats.min)},
                           {"max", number_or_null(any, stats.max)},
                           {"mean", number_or_null(any, stats.mean)},
                           {"std", number_or_null(any, stats.std_dev())},
                           {"nan", stats.nan},
                           {"posinf", stats.pos_inf},
                           {"neginf", stats.neg_inf},
                           {"zeros", stats.zeros}};
      if (complex) entry["of"] = "magnitude";
      if (pthload::is_quantized(t.dtype())) entry["of"] = "integer representation";
      entries.push_back(indented(entry, 2));
    } else {
      const auto cell = [&](double v) { return any ? fmt::format("{:.6g}", v) : "-"; };
      std::cout << fmt::format(
          "{:<{}}  {:<10}  {:>12}  {:>12}  {:>12}  {:>12}  {:>6}  {:>6}  {:>6}  {:>8}\n", display,
          width, pthload::dtype_name(t.dtype()), cell(stats.min), cell(stats.max), cell(stats.mean),
          cell(stats.std_dev()), stats.nan, stats.pos_inf, stats.neg_inf, stats.zeros);
    }
  }
  if (args.json) {
    write_document_of_list(std::cout, "tensors", entries);
    std::cout << '\n';
  }
  return 0;
}

// Errors of the streaming readers know the tensor, not the file.
int run_stat_naming_file(const StatArgs& args) {
  try {
    return run_stat(args);
  } catch (pthload::Error& e) {
    if (e.context().path.empty()) e.context().path = args.path;
    throw;
  }
}

}  // namespace

Command add_stat_command(CLI::App& app) {
  auto args = std::make_shared<StatArgs>();
  auto* cmd = app.add_subcommand(
      "stat", "Per tensor min, max, mean, std and counts of NaN, +-Inf and zeros (one pass)");
  cmd->add_option("file", args->path, "checkpoint")->required();
  cmd->add_option("names", args->names, "only these tensors (default: all)");
  cmd->add_flag("--json", args->json, "print JSON instead of a table");
  return {cmd, [args] { return run_stat_naming_file(*args); }};
}

}  // namespace pthinspect
