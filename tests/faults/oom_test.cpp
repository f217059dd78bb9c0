// Memory that runs out while placing: an OutOfMemoryError naming the storage, its record and the
// bytes asked for, and nothing of the load left allocated (ASan's leak checker in CI).
#include <doctest/doctest.h>

#include "common/fault_hooks.hpp"
#include "faults/checkpoint_writer.hpp"
#include "faults/support.hpp"
#include "pthload/pthload.hpp"

namespace pthload::faults {
namespace {

bool fail_large(std::size_t bytes) {
  return bytes >= (std::size_t{1} << 20);
}

}  // namespace

TEST_CASE("faults: a host buffer that cannot be allocated is an OutOfMemoryError naming it") {
  const TempPath file("oom.pt");
  write_float_checkpoint(file.path(), std::size_t{2} << 20);
  for (const IoStrategy io : {IoStrategy::kMap, IoStrategy::kRead}) {
    LoadOptions options{.copy_cpu_storages = true};
    options.io = io;
    common::fault_hooks::set_allocation_failure(fail_large);
    try {
      (void)load(file.path(), options);
      FAIL("no error");
    } catch (const OutOfMemoryError& e) {
      CHECK(e.code() == Errc::kOutOfMemory);
      CHECK(e.context().record == "archive/data/0");
      CHECK(e.context().path == file.path().string());
      CHECK(e.message() == "out of memory placing storage '0' (8388608 bytes) on cpu");
    }
    common::fault_hooks::set_allocation_failure(nullptr);
    CHECK(load(file.path(), options).storages()[0]->bytes().size() == 8388608);
  }
}

}  // namespace pthload::faults
