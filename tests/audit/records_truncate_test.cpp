// Record reads (RecordReader: the list, CRC checks, reads) of a checkpoint shrunk by another
// thread at random points while they run, the truncation race of issue 18
// (support/truncation_race.hpp): every read must end in success or a pthload::Error; a SIGBUS
// kills this process and fails the test. Loads in the same race:
// tests/formats/faults_truncate_test.cpp.
#include <doctest/doctest.h>

#include <cstddef>

#include "pthload/records.hpp"
#include "support/checkpoint_file.hpp"
#include "support/files.hpp"
#include "support/truncation_race.hpp"

namespace pthload::test {

TEST_CASE("records: a checkpoint truncated during CRC checks and record reads gives errors") {
  constexpr std::size_t kElements = std::size_t{16} << 20;  // 64 MiB of float32
  const TempPath master("_truncate-master.pt");
  const TempPath path("_truncate.pt");
  write_float_checkpoint(master.path(), kElements);
  const RaceOutcome outcome = truncation_race(master.path(), path.path(), [&](const auto& go) {
    go();
    const RecordReader reader = RecordReader::open(path.path());
    for (const RecordInfo& record : reader.list()) {
      reader.verify_crc(record.name);
      (void)reader.read(record.name);
    }
  });
  MESSAGE("records: " << outcome.loaded << " reads, " << outcome.errors << " errors");
  CHECK(outcome.loaded + outcome.errors == kRaceRounds);
  CHECK(outcome.errors > 0);
}

}  // namespace pthload::test
