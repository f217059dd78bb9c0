// pthbench: named micro-benchmarks over pthload's layers, e.g. `pthbench pickle data.pkl`.
// Each benchmark reads its input once, runs the operation N times and reports the median.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "bench.hpp"
#include "pthload/error.hpp"

namespace {

using pthbench::Benchmark;
using pthbench::Options;

const std::map<std::string, std::pair<Benchmark, std::string_view>>& benchmarks() {
  static const std::map<std::string, std::pair<Benchmark, std::string_view>> table{
      {"pickle",
       {pthbench::bench_pickle, "FILE...  run the pickle machine over each file (a data.pkl)"}},
      {"load",
       {pthbench::bench_load, "FILE...  read once, open, load (views), load (copies) each file"}},
      {"once",
       {pthbench::bench_once,
        "MODE FILE  one open|view|copy|checksum|cuda load or read-chunked|read-fresh|read-index, "
        "then exit (for timing whole processes)"}},
      {"cuda",
       {pthbench::bench_cuda,
        "FILE...  file -> GPU GB/s beside the pinned ceiling of the same run (host backend "
        "without a GPU)"}},
  };
  return table;
}

int usage() {
  std::fprintf(stderr,
               "usage: pthbench [-n REPETITIONS] [-p PARSE_THREADS] BENCHMARK ARGS...\n"
               "benchmarks:\n");
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
  if (i + 1 < argc && std::string_view(argv[i]) == "-p") {
    options.parse_threads = static_cast<unsigned>(std::max(0, std::atoi(argv[i + 1])));
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
