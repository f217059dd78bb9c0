// Memory that runs out while placing: an OutOfMemoryError naming the storage, its record and the
// bytes asked for, and nothing of the load left allocated (ASan's leak checker in CI).
#include <doctest/doctest.h>

#include "common/fault_hooks.hpp"
#include "pthload/pthload.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"

namespace pthload::test {
namespace {

bool fail_large(std::size_t bytes) {
  return bytes >= (std::size_t{1} << 20);
}

// Makes the host buffers of 1 MiB and more fail while it lives, however the scope ends.
struct LargeAllocationsFail {
  LargeAllocationsFail() { common::fault_hooks::set_allocation_failure(fail_large); }
  LargeAllocationsFail(const LargeAllocationsFail&) = delete;
  LargeAllocationsFail& operator=(const LargeAllocationsFail&) = delete;
  ~LargeAllocationsFail() { common::fault_hooks::set_allocation_failure(nullptr); }
};

}  // namespace

TEST_CASE(
    "formats faults: a host buffer that cannot be allocated is an OutOfMemoryError naming it") {
  const TempPath file("_oom.pt");
  write_float_checkpoint(file.path(), std::size_t{2} << 20);
  for (const IoStrategy io : {IoStrategy::kMap, IoStrategy::kRead}) {
    LoadOptions options{.copy_cpu_storages = true};
    options.io = io;
    const auto e = error_thrown<OutOfMemoryError>([&] {
      const LargeAllocationsFail failing;
      (void)load(file.path(), options);
    });
    CHECK(e.code() == Errc::kOutOfMemory);
    CHECK(e.context().record == "archive/data/0");
    CHECK(e.context().path == file.path().string());
    CHECK(e.message() == "out of memory placing storage '0' (8388608 bytes) on cpu");
    CHECK(load(file.path(), options).storages()[0]->bytes().size() == 8388608);
  }
}

}  // namespace pthload::test
