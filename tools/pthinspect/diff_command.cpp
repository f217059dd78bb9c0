// `pthinspect diff A B`: tensors added, removed and changed (dtype, shape, content by checksum,
// and the largest absolute and relative difference where both are numeric and the same shape),
// between two checkpoints in any format the library reads. Exit 0 equal, 1 different, 2 trouble,
// as diff(1).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <map>
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
#include "output.hpp"
#include "values.hpp"

namespace pthinspect {
namespace {

constexpr int kExitDifferent = 1;

struct DiffArgs {
  std::string a;
  std::string b;
  bool json = false;
};

struct Change {
  std::string name;
  bool dtype = false;
  bool shape = false;
  bool content = false;
  std::optional<double> max_abs;
  std::optional<double> max_rel;
};

std::string shape_text(const pthload::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes(), ", "));
}

// The values of a chunk as (re, im) pairs.
void decode(pthload::Dtype dtype, std::span<const std::byte> bytes, std::vector<double>& out) {
  out.clear();
  for_each_value(dtype, bytes, [&](double re, double im) {
    out.push_back(re);
    out.push_back(im);
  });
}

// The largest |a - b| and |a - b| / max(|a|, |b|) over the elements, streaming both tensors in
// lockstep. NaN against NaN and equal infinities count as equal; anything else against NaN or
// an infinity is an infinite difference.
void numeric_difference(const pthload::Tensor& a, const pthload::Tensor& b, Change& change) {
  constexpr std::size_t kElements = std::size_t{1} << 18;
  ElementReader reader_a(a, change.name);
  ElementReader reader_b(b, change.name);
  std::vector<double> values_a;
  std::vector<double> values_b;
  double max_abs = 0;
  double max_rel = 0;
  // Chunks of the two tensors need not be the same length (a strided view's are boxes):
  // values left over from one side wait for the other side's next chunk.
  std::size_t at_a = 0;
  std::size_t at_b = 0;
  for (;;) {
    if (at_a == values_a.size()) {
      decode(a.dtype(), reader_a.next(kElements * pthload::element_size(a.dtype())), values_a);
      at_a = 0;
    }
    if (at_b == values_b.size()) {
      decode(b.dtype(), reader_b.next(kElements * pthload::element_size(b.dtype())), values_b);
      at_b = 0;
    }
    if (values_a.empty() || values_b.empty()) break;
    for (; at_a < values_a.size() && at_b < values_b.size(); at_a += 2, at_b += 2) {
      const double ar = values_a[at_a];
      const double ai = values_a[at_a + 1];
      const double br = values_b[at_b];
      const double bi = values_b[at_b + 1];
      const bool same = (ar == br || (std::isnan(ar) && std::isnan(br))) &&
                        (ai == bi || (std::isnan(ai) && std::isnan(bi)));
      if (same) continue;
      const double re = ar - br;
      const double im = ai - bi;
      const double diff = std::isfinite(re) && std::isfinite(im)
                              ? std::hypot(re, im)
                              : std::numeric_limits<double>::infinity();
      const double scale = std::max(std::hypot(ar, ai), std::hypot(br, bi));
      max_abs = std::max(max_abs, diff);
      max_rel = std::max(max_rel, scale > 0 && std::isfinite(scale)
                                      ? diff / scale
                                      : std::numeric_limits<double>::infinity());
    }
  }
  change.max_abs = max_abs;
  change.max_rel = max_rel;
}

nlohmann::json finite_or_null(std::optional<double> value) {
  return value && std::isfinite(*value) ? nlohmann::json(*value) : nlohmann::json();
}

int run_diff(const DiffArgs& args) {
  const auto cpu = pthload::LoadOptions{.map_location = pthload::map_to("cpu")};
  const pthload::Checkpoint a = pthload::load(args.a, cpu);
  const pthload::Checkpoint b = pthload::load(args.b, cpu);
  std::map<std::string_view, const pthload::Tensor*> in_a;
  std::map<std::string_view, const pthload::Tensor*> in_b;
  for (const auto& named : a.tensors())
    in_a.emplace(named.name, &named.tensor);
  for (const auto& named : b.tensors())
    in_b.emplace(named.name, &named.tensor);

  std::vector<std::string> removed;
  std::vector<std::string> added;
  // Every tensor in both, with what its metadata says; those of one dtype and shape are compared
  // by checksum, each side's read together (content_checksums_naming). A Change is made only
  // for what differs: 100 000 tensors of an optimizer state are mostly the same.
  struct Pair {
    std::string_view name;
    const pthload::Tensor* a;
    const pthload::Tensor* b;
    bool dtype;
    bool shape;
    bool content;
    bool numeric;
  };
  std::vector<Pair> pairs;
  std::vector<const pthload::Tensor*> hashed_a;
  std::vector<const pthload::Tensor*> hashed_b;
  std::vector<std::string_view> hashed_names;
  std::vector<std::size_t> hashed_pairs;
  for (auto* list : {&hashed_a, &hashed_b})
    list->reserve(in_a.size());
  pairs.reserve(in_a.size());
  hashed_names.reserve(in_a.size());
  hashed_pairs.reserve(in_a.size());
  for (const auto& [name, ta] : in_a) {
    const auto found = in_b.find(name);
    if (found == in_b.end()) {
      removed.emplace_back(name);
      continue;
    }
    const pthload::Tensor& tb = *found->second;
    Pair pair{.name = name, .a = ta, .b = &tb};
    pair.dtype = ta->dtype() != tb.dtype();
    pair.shape = !std::ranges::equal(ta->sizes(), tb.sizes()) || ta->layout() != tb.layout();
    const bool readable = unreadable_reason(*ta).empty() && unreadable_reason(tb).empty();
    if (readable && !pair.dtype && !pair.shape) {
      hashed_a.push_back(ta);
      hashed_b.push_back(&tb);
      hashed_names.push_back(name);
      hashed_pairs.push_back(pairs.size());
    }
    // Another dtype: the values are compared below.
    pair.content = readable && !pair.shape && pair.dtype;
    pair.numeric = readable && !pair.shape && is_numeric(ta->dtype()) && is_numeric(tb.dtype()) &&
                   (ta->dtype() == tb.dtype() || (ta->dtype() != pthload::Dtype::kFloat4E2M1FNx2 &&
                                                  tb.dtype() != pthload::Dtype::kFloat4E2M1FNx2));
    pairs.push_back(pair);
  }
  const auto sums_a = content_checksums_naming(hashed_a, hashed_names, args.a);
  const auto sums_b = content_checksums_naming(hashed_b, hashed_names, args.b);
  for (std::size_t i = 0; i < hashed_pairs.size(); ++i)
    pairs[hashed_pairs[i]].content = sums_a[i] != sums_b[i];

  std::vector<Change> changed;
  std::size_t same = 0;
  for (const Pair& pair : pairs) {
    if (!pair.dtype && !pair.shape && !pair.content) {
      ++same;
      continue;
    }
    Change change{.name = std::string(pair.name),
                  .dtype = pair.dtype,
                  .shape = pair.shape,
                  .content = pair.content};
    if (pair.content && pair.numeric) numeric_difference(*pair.a, *pair.b, change);
    changed.push_back(std::move(change));
  }
  for (const auto& [name, tb] : in_b)
    if (!in_a.contains(name)) added.emplace_back(name);

  const bool equal = removed.empty() && added.empty() && changed.empty();
  if (args.json) {
    auto list = nlohmann::json::array();
    for (const auto& c : changed) {
      nlohmann::json entry{{"name", c.name}};
      const pthload::Tensor& ta = *in_a.at(c.name);
      const pthload::Tensor& tb = *in_b.at(c.name);
      if (c.dtype)
        entry["dtype"] = {pthload::dtype_name(ta.dtype()), pthload::dtype_name(tb.dtype())};
      if (c.shape) {
        entry["shape"] = {std::vector<std::int64_t>(ta.sizes().begin(), ta.sizes().end()),
                          std::vector<std::int64_t>(tb.sizes().begin(), tb.sizes().end())};
      }
      entry["content"] = c.content;
      if (c.max_abs) {
        entry["max_abs_diff"] = finite_or_null(c.max_abs);
        entry["max_rel_diff"] = finite_or_null(c.max_rel);
      }
      list.push_back(std::move(entry));
    }
    std::cout << nlohmann::json{{"equal", equal},
                                {"same", same},
                                {"changed", list},
                                {"added", added},
                                {"removed", removed}}
                     .dump(1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
    return equal ? 0 : kExitDifferent;
  }
  const bool colour = use_colour(1);
  for (const auto& name : removed)
    std::cout << coloured(fmt::format("- {}", name), "31", colour) << "  (only in A)\n";
  for (const auto& name : added)
    std::cout << coloured(fmt::format("+ {}", name), "32", colour) << "  (only in B)\n";
  for (const auto& c : changed) {
    const pthload::Tensor& ta = *in_a.at(c.name);
    const pthload::Tensor& tb = *in_b.at(c.name);
    std::vector<std::string> what;
    if (c.dtype)
      what.push_back(fmt::format("dtype {} -> {}", pthload::dtype_name(ta.dtype()),
                                 pthload::dtype_name(tb.dtype())));
    if (c.shape) what.push_back(fmt::format("shape {} -> {}", shape_text(ta), shape_text(tb)));
    if (c.max_abs) {
      what.push_back(
          fmt::format("content: max abs diff {:.6g}, max rel diff {:.6g}", *c.max_abs, *c.max_rel));
    } else if (c.content) {
      what.push_back("content differs");
    }
    std::cout << coloured(fmt::format("~ {}", c.name), "33", colour) << "  "
              << fmt::format("{}", fmt::join(what, "; ")) << '\n';
  }
  std::cout << fmt::format("{} equal, {} changed, {} added, {} removed\n", same, changed.size(),
                           added.size(), removed.size());
  return equal ? 0 : kExitDifferent;
}

}  // namespace

Command add_diff_command(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  auto* cmd = app.add_subcommand(
      "diff", "Compare the tensors of two checkpoints (exit 0 equal, 1 different, 2 trouble)");
  cmd->add_option("a", args->a, "first checkpoint")->required();
  cmd->add_option("b", args->b, "second checkpoint")->required();
  cmd->add_flag("--json", args->json, "print JSON instead of a list");
  // Trouble exits 2, as diff(1), since 1 means "different".
  return {cmd, [args] { return run_diff(*args); }, 2};
}

}  // namespace pthinspect
