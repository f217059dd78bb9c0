// Fuzz target for the pickle machine. Properties: any input yields a value tree (which then
// prints) or a pthload::Error, within small limits, without crashing, leaking or hanging; and
// whenever the machine accepts a pickle, the opcode census — a second, linear decoder that builds
// nothing (pickletools.genops' way) — reads the same opcodes to the same STOP, so the two
// decoders cannot drift apart on any opcode's argument layout; and where the machine refuses a
// pickle, the opcode it names is one the census reads too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "pickle/census.hpp"
#include "pickle/codecs.hpp"
#include "pickle/machine.hpp"
#include "pickle/print.hpp"
#include "pickle_limits.hpp"
#include "pthload/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pthload::pickle;
  static Machine machine(pthload::fuzz::pickle_fuzz_limits(200));
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
    const OpcodeCensus census = opcode_census(bytes);
    if (!census.complete || census.end_offset != result.end_offset) std::abort();
    PrintOptions print_options;
    print_options.max_depth = 50;
    print_options.max_items = 50;
    (void)print(*result.root, print_options);
    (void)bytes_of(*result.root);
  } catch (const pthload::Error& e) {
    // The machine fails at an opcode the census also starts, or where the input or the pickle
    // ends: the two never disagree on where an opcode starts.
    if (!e.context().offset) std::abort();  // every refusal names where it is
    const std::size_t at = static_cast<std::size_t>(*e.context().offset);
    const auto starts = opcode_starts(bytes);
    const bool at_opcode = std::binary_search(starts.begin(), starts.end(), at);
    if (!at_opcode && at != bytes.size() && at != opcode_census(bytes).end_offset) std::abort();
  }
  return 0;
}
