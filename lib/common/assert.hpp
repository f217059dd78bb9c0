// PTHLOAD_ASSERT: invariants of pthload's own code, checked in debug builds. Never for input:
// what a file says is checked with an error, always.
#pragma once

#include <cassert>

#define PTHLOAD_ASSERT(condition) assert(condition)
