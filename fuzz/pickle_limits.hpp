// The limits the pickle fuzz targets run the machine under: small enough that each input runs in
// milliseconds, large enough that every opcode and memo path is reachable.
#pragma once

#include <cstddef>

#include "pthload/limits.hpp"

namespace pthload::fuzz {

/// `max_nesting` differs per target: the printer is fuzzed deeper than the machine alone, since
/// its depth caps are what it tests.
inline Limits pickle_fuzz_limits(std::size_t max_nesting) {
  Limits limits;
  limits.max_pickle_stack = 10'000;
  limits.max_pickle_memo = 10'000;
  limits.max_pickle_nesting = max_nesting;
  limits.max_pickle_values = 100'000;
  return limits;
}

}  // namespace pthload::fuzz
