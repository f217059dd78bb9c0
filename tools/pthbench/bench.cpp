// pthbench's timing and reporting.
#include "bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace pthbench {

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

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

}  // namespace pthbench
