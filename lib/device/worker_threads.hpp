// Work shared among threads by index, in order: the CUDA pipeline's readers and the CPU copies'
// readers both take units of a list this way and stop at the first error.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace pthload::device {

/// The threads for `work_items` units when `requested` were asked for (0: min(8, hardware
/// threads)): never more than there are units.
[[nodiscard]] inline unsigned worker_threads(unsigned requested, std::size_t work_items) noexcept {
  const unsigned threads =
      requested != 0 ? requested : std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  return static_cast<unsigned>(std::min<std::size_t>(threads, work_items));
}

/// Calls worker(i) for each i in [0, count), taken in increasing order by `threads` new threads,
/// each with its own worker from make_worker() (its state: a scratch buffer, a current device).
/// The calling thread only waits, so that what the workers set per thread (a CUDA device) never
/// leaks into it — unless no thread can be started, when it does the work itself. The first
/// exception stops the others from taking more units and is rethrown here once all have stopped.
template <typename MakeWorker>
void run_on_threads(std::size_t count, unsigned threads, MakeWorker&& make_worker) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto run = [&] {
    try {
      auto worker = make_worker();
      for (std::size_t i; !failed.load(std::memory_order_relaxed) &&
                          (i = next.fetch_add(1, std::memory_order_relaxed)) < count;) {
        worker(i);
      }
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      failed.store(true, std::memory_order_relaxed);
    }
  };
  {
    std::vector<std::jthread> pool;
    pool.reserve(threads);
    try {
      for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back(run);
    } catch (const std::system_error&) {
      // Fewer threads than asked: those started do the work; none, this one.
      if (pool.empty()) run();
    }
  }  // the threads join here
  if (failure) std::rethrow_exception(failure);
}

}  // namespace pthload::device
