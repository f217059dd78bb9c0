// Fuzz target for the pickle machine. Property: any input yields a value tree (which then
// prints) or a pthload::Error, within small limits, without crashing, leaking or hanging.
#include <cstddef>
#include <cstdint>
#include <span>

#include "pickle/codecs.hpp"
#include "pickle/machine.hpp"
#include "pickle/print.hpp"
#include "pthload/error.hpp"

namespace {

pthload::Limits fuzz_limits() {
  pthload::Limits limits;
  limits.max_pickle_stack = 10'000;
  limits.max_pickle_memo = 10'000;
  limits.max_pickle_nesting = 200;
  limits.max_pickle_values = 100'000;
  return limits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pthload::pickle;
  static Machine machine(fuzz_limits());
  const auto bytes = std::as_bytes(std::span{data, size});
  // The first byte picks run options, so stacked pickles and persistent callbacks get fuzzed.
  RunOptions options;
  options.allow_trailing_bytes = size > 0 && (data[0] & 1) != 0;
  if (size > 0 && (data[0] & 2) != 0) {
    options.persistent_load = [](const Value& id, ValueArena& arena) -> const Value* {
      if (id.is(Kind::kString))
        return arena.make_int(static_cast<std::int64_t>(id.as_string().size()));
      return nullptr;
    };
  }
  try {
    const Result result = machine.run(bytes, options);
    PrintOptions print_options;
    print_options.max_depth = 50;
    print_options.max_items = 50;
    (void)print(*result.root, print_options);
    (void)bytes_of(*result.root);
  } catch (const pthload::Error&) {
  }
  return 0;
}
