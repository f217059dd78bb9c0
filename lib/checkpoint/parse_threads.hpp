// Whether a load may run a thread of its own besides the caller's (LoadOptions::parse_threads):
// formats/ rebuilds a large pickle's tensors on it while the pickle runs
// (torch/prebuilt_tensors.hpp), and a Checkpoint so opened is released on two threads.
#pragma once

#include <cstddef>

#include "pthload/options.hpp"

namespace pthload::internal {

/// From this size of data.pkl on (a few thousand tensors), its dense tensors are rebuilt on a
/// second thread while the pickle runs: below it, starting the thread costs more than the
/// overlap saves.
inline constexpr std::size_t kPrebuildPickleBytes = std::size_t{256} << 10;

/// Whether `options` allow a second thread: parse_threads > 1, or (0, the default) the machine
/// has more than one hardware thread.
[[nodiscard]] bool uses_parse_thread(const LoadOptions& options) noexcept;

}  // namespace pthload::internal
