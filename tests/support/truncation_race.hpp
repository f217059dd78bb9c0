// Test helper: the truncation race of issue 18 — a file shrunk by another thread at a random
// point while the library reads it — for the loads (tests/formats/faults_truncate_test.cpp) and
// the record reads (tests/audit/records_truncate_test.cpp) that must end in success or a
// pthload::Error, never a signal.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <thread>

#include "pthload/error.hpp"

namespace pthload::test {

/// Rounds of each race.
inline constexpr int kRaceRounds = 24;

/// A fresh copy of `from` at `to`, made in the kernel (cheaper than writing 64 MiB again).
inline void copy_fresh(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::remove(to);
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(in >= 0);
  REQUIRE(out >= 0);
  const auto size = std::filesystem::file_size(from);
  off_t offset = 0;
  while (static_cast<std::uint64_t>(offset) < size) {
    const ssize_t sent = ::sendfile(out, in, &offset, size - static_cast<std::uint64_t>(offset));
    REQUIRE(sent > 0);
  }
  ::close(in);
  ::close(out);
}

/// How the rounds of a race ended.
struct RaceOutcome {
  int loaded = 0;
  int errors = 0;
};

/// Runs `load_once(go)` kRaceRounds times, each with a thread that truncates the file to a random
/// size after a random delay, within about one load's time, from when load_once calls go(). A round
/// that ends in a pthload::Error counts as an error; anything else it throws propagates.
template <typename LoadOnce>
RaceOutcome truncation_race(const std::filesystem::path& master, const std::filesystem::path& path,
                            LoadOnce&& load_once) {
  std::mt19937_64 random(0x18);  // fixed seed: a failure reproduces
  copy_fresh(master, path);
  // The faster of two loads: the first may still be reading the file from disk.
  auto load_time = std::chrono::steady_clock::duration::max();
  for (int i = 0; i < 2; ++i) {
    auto start = std::chrono::steady_clock::now();
    load_once([&] { start = std::chrono::steady_clock::now(); });
    load_time = std::min(load_time, std::chrono::steady_clock::now() - start);
  }
  const auto file_size = std::filesystem::file_size(master);
  RaceOutcome outcome;
  for (int round = 0; round < kRaceRounds; ++round) {
    copy_fresh(master, path);
    const auto delay = std::chrono::duration_cast<std::chrono::microseconds>(load_time) *
                       std::uniform_real_distribution<double>(0, 1)(random);
    const auto new_size = std::uniform_int_distribution<std::uint64_t>(0, file_size - 1)(random);
    std::atomic<bool> go{false};
    std::thread truncator([&] {
      while (!go.load())
        std::this_thread::yield();
      std::this_thread::sleep_for(delay);
      std::filesystem::resize_file(path, new_size);
    });
    try {
      load_once([&] { go = true; });
      ++outcome.loaded;
    } catch (const Error&) {
      ++outcome.errors;
    }
    go = true;  // a load that failed before go() still lets the thread finish
    truncator.join();
  }
  return outcome;
}

}  // namespace pthload::test
