// pthbench: named micro-benchmarks over pthload's layers, e.g. `pthbench pickle data.pkl`.
// Each benchmark reads its input once, runs the operation N times and reports the median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pickle/machine.hpp"
#include "pthload/error.hpp"

namespace {

struct Options {
  int repetitions = 20;
  std::vector<std::string> files;
};

using Benchmark = std::function<int(const Options&)>;

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Times `body` `repetitions` times (after one warm-up run); returns milliseconds, sorted.
std::vector<double> time_runs(int repetitions, const std::function<void()>& body) {
  body();
  std::vector<double> ms;
  for (int i = 0; i < repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    const auto stop = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

void report(std::string_view name, const std::string& file, std::size_t bytes,
            const std::vector<double>& ms) {
  const double median = ms[ms.size() / 2];
  std::printf("%.*s %s: %zu bytes, %zu runs, median %.3f ms, min %.3f ms, %.1f MB/s\n",
              static_cast<int>(name.size()), name.data(), file.c_str(), bytes, ms.size(), median,
              ms.front(), static_cast<double>(bytes) / 1e6 / (median / 1e3));
}

// Machine::run over a whole pickle (a data.pkl); persistent ids become kPersistent nodes, the
// equivalent of a persistent_load returning the id. Also prints the value count and arena size.
int bench_pickle(const Options& options) {
  for (const auto& file : options.files) {
    const auto bytes = read_file(file);
    const auto input = std::as_bytes(std::span{bytes});
    pthload::pickle::Machine machine;
    std::size_t values = 0;
    std::size_t arena_bytes = 0;
    const auto ms = time_runs(options.repetitions, [&] {
      const auto result = machine.run(input);
      values = result.arena->value_count();
      arena_bytes = result.arena->bytes_reserved();
    });
    report("pickle", file, bytes.size(), ms);
    std::printf("pickle %s: %zu values, arena %zu bytes\n", file.c_str(), values, arena_bytes);
  }
  return 0;
}

const std::map<std::string, std::pair<Benchmark, std::string_view>>& benchmarks() {
  static const std::map<std::string, std::pair<Benchmark, std::string_view>> table{
      {"pickle", {bench_pickle, "FILE...  run the pickle machine over each file (a data.pkl)"}},
  };
  return table;
}

int usage() {
  std::fprintf(stderr, "usage: pthbench [-n REPETITIONS] BENCHMARK ARGS...\nbenchmarks:\n");
  for (const auto& [name, entry] : benchmarks()) {
    std::fprintf(stderr, "  %s %.*s\n", name.c_str(), static_cast<int>(entry.second.size()),
                 entry.second.data());
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  int i = 1;
  if (i + 1 < argc && std::string_view(argv[i]) == "-n") {
    options.repetitions = std::max(1, std::atoi(argv[i + 1]));
    i += 2;
  }
  if (i >= argc) return usage();
  const auto it = benchmarks().find(argv[i]);
  if (it == benchmarks().end()) return usage();
  options.files.assign(argv + i + 1, argv + argc);
  if (options.files.empty()) return usage();
  try {
    return it->second.first(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pthbench: %s\n", e.what());
    return 1;
  }
}
