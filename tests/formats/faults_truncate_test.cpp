// The truncation race of issue 18: a checkpoint shrunk by another thread at random points while
// it is loaded as owned copies, loaded as views and read by the library (checksums, contiguous
// copies, Storage::read). Every load must end in success or a pthload::Error; a SIGBUS kills
// this process and fails the test. Record reads in the same race:
// tests/audit/records_truncate_test.cpp.
#include <vector>

#include <doctest/doctest.h>

#include "pthload/pthload.hpp"
#include "support/checkpoint_file.hpp"
#include "support/files.hpp"
#include "support/truncation_race.hpp"

namespace pthload::test {
namespace {

constexpr std::size_t kElements = std::size_t{16} << 20;  // 64 MiB of float32

}  // namespace

TEST_CASE(
    "formats faults: a checkpoint truncated during loads and reads gives errors, never a signal") {
  const TempPath master("_truncate-master.pt");
  const TempPath path("_truncate.pt");
  write_float_checkpoint(master.path(), kElements);

  SUBCASE("io=read: the whole load") {
    LoadOptions options{.copy_cpu_storages = true};
    options.io = IoStrategy::kRead;
    const RaceOutcome outcome = truncation_race(master.path(), path.path(), [&](const auto& go) {
      go();
      const Checkpoint checkpoint = load(path.path(), options);
      CHECK(checkpoint.storages()[0]->bytes().size() == kElements * 4);
    });
    MESSAGE("io=read: " << outcome.loaded << " loads, " << outcome.errors << " errors");
    CHECK(outcome.loaded + outcome.errors == kRaceRounds);
    CHECK(outcome.errors > 0);  // the race is real: some truncations land inside a load
  }
  SUBCASE("io=map: the whole load") {
    // open() reads the index and the pickle into an image with pread, beside the mapping the
    // views use; the copies go through pread too.
    const RaceOutcome outcome = truncation_race(master.path(), path.path(), [&](const auto& go) {
      go();
      const Checkpoint checkpoint = load(path.path(), {.copy_cpu_storages = true});
      CHECK(checkpoint.storages()[0]->bytes().size() == kElements * 4);
    });
    MESSAGE("io=map: " << outcome.loaded << " loads, " << outcome.errors << " errors");
    CHECK(outcome.loaded + outcome.errors == kRaceRounds);
    CHECK(outcome.errors > 0);
  }
  SUBCASE("io=map: a view load and the library's reads of its views") {
    // The views themselves raise SIGBUS when the caller touches truncated pages (documented);
    // the library's own reads of them (checksum, contiguous copy, Storage::read) use pread.
    std::vector<std::byte> first(4096);
    const RaceOutcome outcome = truncation_race(master.path(), path.path(), [&](const auto& go) {
      go();
      const Checkpoint checkpoint = load(path.path());
      const Tensor& w = checkpoint.tensor("w");
      CHECK(w.storage().is_file_view());
      (void)w.content_checksum();
      w.storage().read(w.storage().nbytes() - first.size(), first);
      (void)w.contiguous_bytes();
    });
    MESSAGE("io=map views: " << outcome.loaded << " loads, " << outcome.errors << " errors");
    CHECK(outcome.loaded + outcome.errors == kRaceRounds);
    CHECK(outcome.errors > 0);
  }
}

}  // namespace pthload::test
