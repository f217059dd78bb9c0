// The truncation race of issue 18: a checkpoint shrunk by another thread at random points while
// it is loaded as owned copies, loaded as views and read by the library (checksums, CRC checks,
// record reads). Every load must end in success or a pthload::Error; a SIGBUS
// kills this process and fails the test.
#include <fcntl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "faults/checkpoint_writer.hpp"
#include "faults/support.hpp"
#include "pthload/pthload.hpp"

namespace pthload::faults {
namespace {

constexpr std::size_t kElements = std::size_t{16} << 20;  // 64 MiB of float32
constexpr int kRounds = 24;

// A fresh copy of `from` at `to`, made in the kernel (cheaper than writing 64 MiB again).
void copy_fresh(const std::filesystem::path& from, const std::filesystem::path& to) {
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

struct Outcome {
  int loaded = 0;
  int errors = 0;
};

// Runs `load_once(go)` kRounds times, each with a thread that truncates the file to a random size
// after a random delay, within about one load's time, from when load_once calls go().
template <typename LoadOnce>
Outcome race(const std::filesystem::path& master, const std::filesystem::path& path,
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
  Outcome outcome;
  for (int round = 0; round < kRounds; ++round) {
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

}  // namespace

TEST_CASE("faults: a checkpoint truncated during loads and reads gives errors, never a signal") {
  const TempPath master("truncate-master.pt");
  const TempPath path("truncate.pt");
  write_float_checkpoint(master.path(), kElements);

  SUBCASE("io=read: the whole load") {
    LoadOptions options{.copy_cpu_storages = true};
    options.io = IoStrategy::kRead;
    const Outcome outcome = race(master.path(), path.path(), [&](const auto& go) {
      go();
      const Checkpoint checkpoint = load(path.path(), options);
      CHECK(checkpoint.storages()[0]->bytes().size() == kElements * 4);
    });
    MESSAGE("io=read: " << outcome.loaded << " loads, " << outcome.errors << " errors");
    CHECK(outcome.loaded + outcome.errors == kRounds);
    CHECK(outcome.errors > 0);  // the race is real: some truncations land inside a load
  }
  SUBCASE("io=map: the whole load") {
    // open() reads the index and the pickle into an image with pread, beside the mapping the
    // views use; the copies go through pread too.
    const Outcome outcome = race(master.path(), path.path(), [&](const auto& go) {
      go();
      const Checkpoint checkpoint = load(path.path(), {.copy_cpu_storages = true});
      CHECK(checkpoint.storages()[0]->bytes().size() == kElements * 4);
    });
    MESSAGE("io=map: " << outcome.loaded << " loads, " << outcome.errors << " errors");
    CHECK(outcome.loaded + outcome.errors == kRounds);
    CHECK(outcome.errors > 0);
  }
  SUBCASE("io=map: a view load and the library's reads of its views") {
    // The views themselves raise SIGBUS when the caller touches truncated pages (documented);
    // the library's own reads of them (checksum, contiguous copy, Storage::read) use pread.
    std::vector<std::byte> first(4096);
    const Outcome outcome = race(master.path(), path.path(), [&](const auto& go) {
      go();
      const Checkpoint checkpoint = load(path.path());
      const Tensor& w = checkpoint.tensor("w");
      CHECK(w.storage().is_file_view());
      (void)w.content_checksum();
      w.storage().read(w.storage().nbytes() - first.size(), first);
      (void)w.contiguous_bytes();
    });
    MESSAGE("io=map views: " << outcome.loaded << " loads, " << outcome.errors << " errors");
    CHECK(outcome.loaded + outcome.errors == kRounds);
    CHECK(outcome.errors > 0);
  }
  SUBCASE("records: CRC checks and record reads") {
    const Outcome outcome = race(master.path(), path.path(), [&](const auto& go) {
      go();
      const RecordReader reader = RecordReader::open(path.path());
      for (const RecordInfo& record : reader.list()) {
        reader.verify_crc(record.name);
        (void)reader.read(record.name);
      }
    });
    MESSAGE("records: " << outcome.loaded << " reads, " << outcome.errors << " errors");
    CHECK(outcome.loaded + outcome.errors == kRounds);
    CHECK(outcome.errors > 0);
  }
}

}  // namespace pthload::faults
