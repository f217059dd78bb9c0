// DLPack exports (pthload::to_dlpack, lib/capi/dlpack.cpp) that outlive Checkpoint::to: the
// storages moved CPU -> GPU -> other GPU -> CPU on the device layer's host backend, which stands
// in for two GPUs, while the exports and byte holds keep the bytes they show. Linked with the
// library's internal archives (the backend), not through libpthload as capi_test.cpp is.
#include <dlpack/dlpack.h>
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "device/host_backend.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/dlpack.hpp"
#include "support/checkpoint_file.hpp"
#include "support/host_backend_loads.hpp"

using pthload::Device;
using pthload::device::HostBackend;
using pthload::device::HostBackendSettings;
using pthload::test::check_nothing_left;
using pthload::test::load_on;
using pthload::test::many_storages;

// ASan is what makes this test bite: before holds, to() freed the bytes an export pointed at.
TEST_CASE("dlpack: exports and byte holds keep their bytes across Checkpoint::to") {
  const auto file = many_storages(6, {3000, 7});
  auto backend = std::make_shared<HostBackend>(HostBackendSettings{.devices = 2});
  const auto reference = pthload::load(file.path(), {.map_location = pthload::map_to("cpu")});
  const auto expected = [&](const char* name) {
    const auto bytes = reference.tensor(name).contiguous_bytes();
    return std::vector<std::byte>(bytes.begin(), bytes.end());
  };
  const auto shows = [](const DLManagedTensor* managed, const std::vector<std::byte>& bytes) {
    return std::memcmp(managed->dl_tensor.data, bytes.data(), bytes.size()) == 0;
  };
  // Owned CPU copies: a view of the file would outlive to() through the mapping anyway.
  auto checkpoint = load_on(backend, file.path(),
                            {.map_location = pthload::map_to("cpu"), .copy_cpu_storages = true});
  DLManagedTensor* on_cpu = pthload::to_dlpack(checkpoint.tensor("t0"));
  auto held = checkpoint.tensor("t2").hold_bytes();
  const std::byte* held_bytes = checkpoint.tensor("t2").data();
  REQUIRE(held != nullptr);
  CHECK(checkpoint.tensor("t2").hold_bytes() == held);  // one hold per placement, shared

  pthload::device::move_storages(checkpoint, Device::cuda(0), {}, backend);
  CHECK(checkpoint.tensor("t0").device() == Device::cuda(0));
  CHECK(on_cpu->dl_tensor.device.device_type == kDLCPU);
  CHECK(shows(on_cpu, expected("t0")));
  DLManagedTensor* on_gpu0 = pthload::to_dlpack(checkpoint.tensor("t1"));
  CHECK(on_gpu0->dl_tensor.device.device_type == kDLCUDA);

  pthload::device::move_storages(checkpoint, Device::cuda(1), {}, backend);
  // A hold taken after a move pins the new placement, not the old one.
  auto held_on_gpu1 = checkpoint.tensor("t2").hold_bytes();
  CHECK(held_on_gpu1 != held);
  pthload::device::move_storages(checkpoint, Device::cpu(), {}, backend);
  CHECK(shows(on_cpu, expected("t0")));
  CHECK(shows(on_gpu0, expected("t1")));
  const auto t2 = expected("t2");
  CHECK(std::memcmp(held_bytes, t2.data(), t2.size()) == 0);
  // The device memory left: what the cuda:0 export and the cuda:1 hold pin.
  CHECK(backend->counts().device_allocations == 2);
  CHECK(backend->device_of(on_gpu0->dl_tensor.data) == 0);
  held_on_gpu1.reset();
  CHECK(backend->counts().device_allocations == 1);
  on_gpu0->deleter(on_gpu0);
  CHECK(backend->counts().device_allocations == 0);
  on_cpu->deleter(on_cpu);
  held.reset();
  // Holds end; the checkpoint's own bytes are untouched, and a new hold works.
  CHECK(checkpoint.tensor("t0").contiguous_bytes() == expected("t0"));
  DLManagedTensor* again = pthload::to_dlpack(checkpoint.tensor("t0"));
  CHECK(shows(again, expected("t0")));
  again->deleter(again);
  check_nothing_left(*backend);
}
