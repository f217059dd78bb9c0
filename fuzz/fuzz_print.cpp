// Fuzz target for the tree printer (`print`, what `pthinspect tree` and the tests show). The
// first four bytes pick the print options, the rest is a pickle. Properties: any tree prints
// without crashing or hanging whatever the caps (0 included), and both overloads — the string
// and the stream — produce the same text, so neither can drift from the other.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <sstream>
#include <string>

#include "pickle/machine.hpp"
#include "pickle/print.hpp"
#include "pickle_limits.hpp"
#include "pthload/error.hpp"

namespace {

constexpr std::size_t kOptionBytes = 4;

// Small caps are where the printer's edge cases are ("... (N more)" at 0 items, `...` at depth
// 0, an empty indent), so each option takes a small range, with SIZE_MAX ("no cap") as one value.
std::size_t cap_from(std::uint8_t byte, std::size_t range) {
  return byte == 0xFF ? SIZE_MAX : byte % range;
}

pthload::pickle::PrintOptions options_from(std::span<const std::uint8_t, kOptionBytes> bytes) {
  pthload::pickle::PrintOptions options;
  options.max_depth = cap_from(bytes[0], 64);
  options.max_items = cap_from(bytes[1], 16);
  options.max_string = cap_from(bytes[2], 80);
  options.indent = bytes[3] & 7;
  options.inline_values = (bytes[3] >> 3) & 31;
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pthload::pickle;
  if (size < kOptionBytes) return 0;
  static Machine machine(pthload::fuzz::pickle_fuzz_limits(500));
  const auto print_options =
      options_from(std::span<const std::uint8_t, kOptionBytes>(data, kOptionBytes));
  const auto pickle = std::as_bytes(std::span{data + kOptionBytes, size - kOptionBytes});
  try {
    const Result result = machine.run(pickle, RunOptions{});
    const std::string text = print(*result.root, print_options);
    std::ostringstream streamed;
    print(streamed, *result.root, print_options);
    // abort(), not assert(): the property must hold in release fuzz builds too.
    if (streamed.str() != text) std::abort();
  } catch (const pthload::Error&) {
  }
  return 0;
}
