// `pthbench pickle FILE`: the pickle machine over a data.pkl.
#include <cstdio>
#include <span>

#include "bench.hpp"
#include "pickle/machine.hpp"

namespace pthbench {

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

}  // namespace pthbench
