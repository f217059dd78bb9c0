// pthbench's shared pieces: options, timing and the one-line report every benchmark prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace pthbench {

struct Options {
  int repetitions = 20;
  /// LoadOptions::parse_threads of every load (-p N; 0: the library's default).
  unsigned parse_threads = 0;
  std::vector<std::string> files;
};

using Benchmark = std::function<int(const Options&)>;

/// The whole file.
std::vector<char> read_file(const std::string& path);

/// Times `body` `repetitions` times (after one warm-up run); returns milliseconds, sorted.
std::vector<double> time_runs(int repetitions, const std::function<void()>& body);

/// `NAME FILE: BYTES bytes, N runs, median X ms, min Y ms, Z MB/s` (MB/s only when bytes > 0).
void report(std::string_view name, const std::string& file, std::size_t bytes,
            const std::vector<double>& ms);

/// `once read-index`: what any load of a torch.save zip must read and do at least (the end
/// records, central directory, local headers and data.pkl read as pthload reads them, the
/// pickle's opcodes walked without values); returns the bytes read. Throws std::runtime_error
/// for a file it cannot walk (not a zip, no data.pkl, a compressed one).
std::uint64_t read_index_floor(const std::string& path);

int bench_pickle(const Options& options);
int bench_load(const Options& options);
int bench_once(const Options& options);
int bench_cuda(const Options& options);

}  // namespace pthbench
