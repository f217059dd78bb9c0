// The GPU placement pipeline on the host backend: arena layout, chunking and staging-ring reuse,
// byte order, several devices, the caller's allocator, progress, Checkpoint::to, and cleanup
// after injected failures (out of memory, failing copies) with nothing leaked, and byte holds
// that outlive a move. DLPack exports across a move: tests/capi/dlpack_moves_test.cpp.
#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "device/cpu/kernels.hpp"
#include "device/host_backend.hpp"
#include "device/place.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/host_backend_loads.hpp"
#include "support/pickle_writer.hpp"

using pthload::Device;
using pthload::Dtype;
using pthload::Errc;
using pthload::device::HostBackend;
using pthload::device::HostBackendSettings;
using pthload::device::PipelineReport;
using pthload::test::check_nothing_left;
using pthload::test::checkpoint_file;
using pthload::test::distinct_floats;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::load_on;
using pthload::test::many_storages;
using pthload::test::PickleWriter;

namespace {

// Each storage's device bytes (host memory, on the host backend) equal its CPU load.
void check_same_bytes(const pthload::Checkpoint& on_device, const std::filesystem::path& path) {
  const auto on_cpu = pthload::load(path, {.map_location = pthload::map_to("cpu")});
  REQUIRE(on_device.storages().size() == on_cpu.storages().size());
  for (std::size_t i = 0; i < on_cpu.storages().size(); ++i) {
    const auto& device = *on_device.storages()[i];
    const auto expected = on_cpu.storages()[i]->bytes();
    CAPTURE(device.key());
    REQUIRE(device.device().type == Device::Type::kCuda);
    if (expected.empty()) continue;
    REQUIRE(device.device_pointer() != nullptr);
    CHECK(std::memcmp(device.device_pointer(), expected.data(), expected.size()) == 0);
  }
}

// Storages '0' (cpu), '1' (cuda:0), '2' (cpu, a deflated record), '3' (cpu) and '4' (cuda:0), of
// 4, 3, 4, 2 and 5 floats with values distinct across the file.
pthload::test::TempPath mixed_storages() {
  struct Part {
    int count;
    const char* location;
    bool deflate;
  };
  const std::vector<Part> parts = {{4, "cpu", false},
                                   {3, "cuda:0", false},
                                   {4, "cpu", true},
                                   {2, "cpu", false},
                                   {5, "cuda:0", false}};
  PickleWriter p;
  p.empty_dict().mark();
  std::vector<pthload::test::zip_build::Record> records;
  float next = 0.25f;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string key = std::to_string(i);
    const int n = parts[i].count;
    p.str("t" + key).tensor_v2("FloatStorage", key, n, 0, {n}, {1}, parts[i].location);
    records.push_back(
        {.name = "ck/data/" + key, .data = distinct_floats(n, next), .deflate = parts[i].deflate});
  }
  p.setitems().stop();
  return checkpoint_file(p.bytes(), records);
}

// What placing left of each storage: key, device, whether a view of the file, and its bytes.
std::vector<std::string> placements(const pthload::Checkpoint& checkpoint) {
  std::vector<std::string> seen;
  for (const auto& storage : checkpoint.storages()) {
    const auto nbytes = static_cast<std::size_t>(storage->nbytes());
    std::string bytes(nbytes, '\0');
    if (storage->device().type == Device::Type::kCuda) {
      if (nbytes > 0) std::memcpy(bytes.data(), storage->device_pointer(), nbytes);
    } else {
      std::memcpy(bytes.data(), storage->bytes().data(), nbytes);
    }
    seen.push_back(std::string(storage->key()) + " " + storage->device().to_string() +
                   (storage->is_file_view() ? " view " : " owned ") + bytes);
  }
  return seen;
}

}  // namespace

TEST_CASE("device pipeline: small storages share arenas laid out like the file") {
  const auto file = many_storages(300, {1, 7, 64, 3});
  auto backend = std::make_shared<HostBackend>(HostBackendSettings{.devices = 2});
  PipelineReport report;
  {
    const auto checkpoint =
        load_on(backend, file.path(), {.map_location = pthload::map_to("cuda:0")}, &report);
    check_same_bytes(checkpoint, file.path());
    CHECK(report.allocations == 1);  // 300 storages, one allocation, one copy
    CHECK(report.arenas == 1);
    CHECK(report.copies == 1);
    CHECK(backend->counts().device_allocations == 1);
    // Staging is freed when the load returns; the arena lives with the storages.
    CHECK(backend->counts().staging_allocations == 0);
    CHECK(backend->counts().streams == 0);
  }
  check_nothing_left(*backend);
}

TEST_CASE("device pipeline: without arenas each storage is its own allocation") {
  const auto file = many_storages(40, {5, 9});
  auto backend = std::make_shared<HostBackend>();
  PipelineReport report;
  pthload::LoadOptions options{.map_location = pthload::map_to("cuda:0")};
  options.cuda.arena_storage_bytes = 0;
  const auto checkpoint = load_on(backend, file.path(), options, &report);
  check_same_bytes(checkpoint, file.path());
  CHECK(report.allocations == 40);
  CHECK(report.arenas == 0);
  CHECK(report.copies == 40);
}

TEST_CASE("device pipeline: large storages are chunked through a bounded ring reused by events") {
  // 3 storages of 100 000 floats (400 KB), 4 KiB slots, 3 slots, 4 readers, and copies that
  // sleep on their stream: a slot refilled before its copy ran would corrupt the result.
  const auto file = many_storages(3, {100'000});
  auto backend = std::make_shared<HostBackend>(
      HostBackendSettings{.copy_delay = std::chrono::microseconds(20)});
  pthload::LoadOptions options{.map_location = pthload::map_to("cuda:0")};
  options.cuda.staging_buffers = 3;
  options.cuda.staging_buffer_bytes = 4096;
  options.cuda.reader_threads = 4;
  options.cuda.arena_storage_bytes = 1000;  // these are large storages
  PipelineReport report;
  const auto checkpoint = load_on(backend, file.path(), options, &report);
  check_same_bytes(checkpoint, file.path());
  CHECK(report.allocations == 3);
  CHECK(report.copies == 3 * ((400'000 + 4095) / 4096));
  CHECK(report.staging_bytes == 3 * 4096);
  CHECK(backend->counts().peak_staging_bytes == 3 * 4096);
  CHECK(report.reader_threads == 4);
}

TEST_CASE("device pipeline: a tiny checkpoint pins kilobytes, not the staging budget") {
  const auto file = many_storages(2, {4});
  auto backend = std::make_shared<HostBackend>();
  PipelineReport report;
  const auto checkpoint =
      load_on(backend, file.path(), {.map_location = pthload::map_to("cuda:0")}, &report);
  CHECK(report.staging_bytes == 4096);
  CHECK(backend->counts().peak_staging_bytes == 4096);
}

TEST_CASE("device pipeline: tags keep storages on their own devices, one ring each") {
  const auto file = many_storages(20, {16, 3000});
  auto backend = std::make_shared<HostBackend>(HostBackendSettings{.devices = 2});
  {
    const auto checkpoint = load_on(backend, file.path(), {});
    check_same_bytes(checkpoint, file.path());
    for (const auto& storage : checkpoint.storages()) {
      const int expected = std::stoi(std::string(storage->key())) % 2;
      CHECK(storage->device() == Device::cuda(expected));
      CHECK(backend->device_of(storage->device_pointer()) == expected);
    }
  }
  check_nothing_left(*backend);
  // A caller's stream serves one device only.
  pthload::LoadOptions options;
  int not_a_stream = 0;
  options.cuda.stream = &not_a_stream;
  CHECK(error_code_of([&] { (void)load_on(backend, file.path(), options); }) ==
        Errc::kDeviceBadOptions);
  check_nothing_left(*backend);
}

TEST_CASE("device pipeline: CUDA options no load can use fail before a byte is placed") {
  // Half the storages copied to the CPU, half to cuda:0, both failing ways: neither may wait for
  // the CPU copies (or progress) before it fails.
  const auto file = many_storages(8, {5000});
  auto backend = std::make_shared<HostBackend>(HostBackendSettings{.devices = 2});
  int not_a_stream = 0;
  for (const bool no_staging : {true, false}) {
    CAPTURE(no_staging);
    pthload::LoadOptions options{.map_location = pthload::map_dict({{"cuda:1", "cpu"}}),
                                 .copy_cpu_storages = true};
    if (no_staging) {
      options.cuda.staging_buffers = 0;
    } else {
      options.map_location = pthload::map_dict({{"cuda:1", "cuda:1"}});
      options.cuda.stream = &not_a_stream;
    }
    std::uint64_t progressed = 0;
    options.cuda.progress = [&](std::uint64_t placed, std::uint64_t) { progressed = placed; };
    auto checkpoint = pthload::open(file.path(), options);
    CHECK(error_code_of([&] { pthload::device::place_storages(checkpoint, options, backend); }) ==
          Errc::kDeviceBadOptions);
    CHECK(progressed == 0);
    for (const auto& storage : checkpoint.storages())
      CHECK_FALSE(storage->is_placed());
  }
  check_nothing_left(*backend);
}

TEST_CASE("device pipeline: a big-endian checkpoint is swapped on the device") {
  PickleWriter p;
  p.empty_dict().mark();
  p.str("f").tensor_v2("FloatStorage", "0", 2, 0, {2}, {1});
  p.str("d").tensor_v2("DoubleStorage", "1", 1, 0, {1}, {1});
  p.setitems().stop();
  std::string floats;  // 1.5f and -2.0f, big-endian
  for (const std::uint32_t word : {0x3fc00000u, 0xc0000000u}) {
    for (int shift = 24; shift >= 0; shift -= 8)
      floats += static_cast<char>((word >> shift) & 0xff);
  }
  const std::string doubles("\x40\x09\x21\xfb\x54\x44\x2d\x18", 8);  // pi, big-endian
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/byteorder", .data = "big"},
                                                {.name = "ck/data/0", .data = floats},
                                                {.name = "ck/data/1", .data = doubles}});
  auto backend = std::make_shared<HostBackend>();
  const auto checkpoint =
      load_on(backend, file.path(), {.map_location = pthload::map_to("cuda:0")});
  check_same_bytes(checkpoint, file.path());
  float f[2];
  std::memcpy(f, checkpoint.tensor("f").storage().device_pointer(), sizeof f);
  CHECK(f[0] == 1.5f);
  CHECK(f[1] == -2.0f);
}

TEST_CASE("device pipeline: an allocation failing midway releases everything and names it") {
  const auto file = many_storages(6, {100'000, 8});
  for (int k = 0; k < 4; ++k) {
    CAPTURE(k);
    auto backend = std::make_shared<HostBackend>(HostBackendSettings{.fail_allocation_at = k});
    pthload::LoadOptions options{.map_location = pthload::map_to("cuda:0")};
    options.cuda.arena_storage_bytes = 0;
    const auto e =
        error_thrown<pthload::DeviceError>([&] { (void)load_on(backend, file.path(), options); });
    CHECK(e.code() == Errc::kDeviceAllocationFailed);
    const std::string text = e.what();
    CHECK(text.find("storage '" + std::to_string(k) + "'") != std::string::npos);
    CHECK(text.find("cuda:0") != std::string::npos);
    CHECK(text.find(k % 2 == 0 ? "400000 bytes" : "32 bytes") != std::string::npos);
    CHECK(text.find(file.path().string()) == 0);
    CHECK(text.find("--map-location") == std::string::npos);
    check_nothing_left(*backend);
  }
}

TEST_CASE("device pipeline: a copy failing midway releases everything, with no hang") {
  const auto file = many_storages(4, {100'000});
  for (const int k : {0, 5, 40, 97}) {
    CAPTURE(k);
    auto backend = std::make_shared<HostBackend>(
        HostBackendSettings{.fail_copy_at = k, .copy_delay = std::chrono::microseconds(10)});
    pthload::LoadOptions options{.map_location = pthload::map_to("cuda:0")};
    options.cuda.staging_buffer_bytes = 4096;
    options.cuda.staging_buffers = 4;
    options.cuda.reader_threads = 3;
    CHECK(error_code_of([&] { (void)load_on(backend, file.path(), options); }) ==
          Errc::kDeviceCopyFailed);
    check_nothing_left(*backend);
  }
  auto backend = std::make_shared<HostBackend>(HostBackendSettings{.fail_staging_at = 1});
  pthload::LoadOptions options{.map_location = pthload::map_to("cuda:0")};
  options.cuda.staging_buffer_bytes = 4096;
  CHECK(error_code_of([&] { (void)load_on(backend, file.path(), options); }) ==
        Errc::kDeviceAllocationFailed);
  check_nothing_left(*backend);
}

TEST_CASE("device pipeline: the caller's allocator, and pthload frees only what it allocated") {
  const auto file = many_storages(10, {1000, 10});
  auto backend = std::make_shared<HostBackend>();
  std::vector<std::pair<void*, std::size_t>> given;
  std::set<void*> returned;
  pthload::LoadOptions options{.map_location = pthload::map_to("cuda:0")};
  options.cuda.arena_storage_bytes = 0;
  options.cuda.allocator.allocate = [&](int device, std::size_t bytes) -> void* {
    CHECK(device == 0);
    void* pointer = backend->allocate(0, bytes);
    given.emplace_back(pointer, bytes);
    return pointer;
  };
  options.cuda.allocator.deallocate = [&](int, void* pointer, std::size_t) {
    returned.insert(pointer);
    backend->free(0, pointer);
  };
  {
    const auto checkpoint = load_on(backend, file.path(), options);
    check_same_bytes(checkpoint, file.path());
    CHECK(given.size() == 10);
    CHECK(returned.empty());
  }
  CHECK(returned.size() == 10);
  check_nothing_left(*backend);

  // Without deallocate the memory is the caller's to free; an allocator saying no is an error.
  options.cuda.allocator.deallocate = nullptr;
  given.clear();
  { (void)load_on(backend, file.path(), options); }
  CHECK(backend->counts().device_allocations == 10);
  for (const auto& [pointer, bytes] : given)
    backend->free(0, pointer);
  options.cuda.allocator.allocate = [](int, std::size_t) -> void* { return nullptr; };
  CHECK(error_code_of([&] { (void)load_on(backend, file.path(), options); }) ==
        Errc::kDeviceAllocationFailed);
  check_nothing_left(*backend);
}

TEST_CASE("device pipeline: progress climbs to the total, and the caller's thread is untouched") {
  const auto file = many_storages(8, {50'000, 3});
  auto backend = std::make_shared<HostBackend>();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  pthload::LoadOptions options{.map_location = pthload::map_dict({{"cuda:1", "cpu"}})};
  options.cuda.staging_buffer_bytes = 65536;
  options.cuda.progress = [&](std::uint64_t placed, std::uint64_t total) {
    calls.emplace_back(placed, total);
  };
  const auto checkpoint = load_on(backend, file.path(), options);
  REQUIRE_FALSE(calls.empty());
  const std::uint64_t total = 4 * 200'000 + 4 * 12;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CHECK(calls[i].second == total);
    if (i > 0) CHECK(calls[i].first > calls[i - 1].first);
  }
  CHECK(calls.back().first == total);
  CHECK_FALSE(backend->used_device_on(std::this_thread::get_id()));
}

TEST_CASE("device pipeline: Checkpoint::to moves storages CPU -> GPU -> other GPU -> CPU") {
  const auto file = many_storages(12, {2000, 5});
  auto backend = std::make_shared<HostBackend>(HostBackendSettings{.devices = 2});
  auto checkpoint = load_on(backend, file.path(), {.map_location = pthload::map_to("cpu")});
  const auto reference = pthload::load(file.path(), {.map_location = pthload::map_to("cpu")});
  pthload::device::move_storages(checkpoint, Device::cuda(0), {}, backend);
  check_same_bytes(checkpoint, file.path());
  pthload::device::move_storages(checkpoint, Device::cuda(1), {}, backend);
  check_same_bytes(checkpoint, file.path());
  for (const auto& storage : checkpoint.storages())
    CHECK(backend->device_of(storage->device_pointer()) == 1);
  CHECK(checkpoint.tensor("t3").device() == Device::cuda(1));
  pthload::device::move_storages(checkpoint, Device::cpu(), {}, backend);
  for (std::size_t i = 0; i < reference.storages().size(); ++i) {
    const auto a = checkpoint.storages()[i]->bytes();
    const auto b = reference.storages()[i]->bytes();
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size()) == 0);
  }
  check_nothing_left(*backend);
  // A device that does not exist changes nothing.
  CHECK(error_code_of([&] {
          pthload::device::move_storages(checkpoint, Device::cuda(2), {}, backend);
        }) == Errc::kDeviceOrdinalOutOfRange);
  CHECK(checkpoint.tensor("t3").device() == Device::cpu());
  // After open(), to() places.
  auto opened = pthload::open(file.path());
  pthload::device::move_storages(opened, Device::cuda(1), {}, backend);
  check_same_bytes(opened, file.path());
}

TEST_CASE("device pipeline: Checkpoint::to refuses meta storages, kSkipStorage and no device") {
  const auto file = many_storages(4, {50});
  auto backend = std::make_shared<HostBackend>(HostBackendSettings{.devices = 2});
  const auto devices_of = [](const pthload::Checkpoint& checkpoint) {
    std::vector<Device> devices;
    for (const auto& storage : checkpoint.storages())
      devices.push_back(storage->device());
    return devices;
  };
  // Storage '2' on meta, the others on the CPU: no storage moves, and the error names '2'
  // (torch: "Cannot copy out of meta tensor; no data!"). The move used to report success.
  auto mixed = load_on(backend, file.path(),
                       {.map_location = [](const pthload::StorageInfo& s, std::string_view) {
                         return std::optional(s.key == "2" ? Device::meta() : Device::cpu());
                       }});
  const auto before = devices_of(mixed);
  for (const Device target : {Device::cpu(), Device::cuda(0)}) {
    CAPTURE(target.to_string());
    const auto e = error_thrown<pthload::UnsupportedError>(
        [&] { pthload::device::move_storages(mixed, target, {}, backend); });
    CHECK(e.code() == Errc::kDeviceUnsupportedType);
    CHECK(std::string(e.what()).find("storage '2' is on meta") != std::string::npos);
    CHECK(devices_of(mixed) == before);
    check_nothing_left(*backend);
  }
  // kSkipStorage after open() placed nothing and dropped every tensor; after load() too.
  auto opened = pthload::open(file.path());
  CHECK(error_code_of([&] {
          pthload::device::move_storages(opened, pthload::kSkipStorage, {}, backend);
        }) == Errc::kDeviceUnsupportedType);
  CHECK(opened.tensors().size() == 4);
  CHECK(opened.storages().size() == 4);
  auto loaded = load_on(backend, file.path(), {.map_location = pthload::map_to("cpu")});
  CHECK(error_code_of([&] {
          pthload::device::move_storages(loaded, pthload::kSkipStorage, {}, backend);
        }) == Errc::kDeviceUnsupportedType);
  // A type outside the enum went down the CUDA path; an index below -1 is no device.
  const Device bogus{static_cast<Device::Type>(7), 0};
  CHECK(error_code_of([&] { pthload::device::move_storages(loaded, bogus, {}, backend); }) ==
        Errc::kDeviceUnsupportedType);
  CHECK(error_code_of([&] { pthload::device::move_storages(opened, bogus, {}, backend); }) ==
        Errc::kDeviceUnsupportedType);
  CHECK(error_code_of([&] {
          pthload::device::move_storages(loaded, Device::cuda(-2), {}, backend);
        }) == Errc::kDeviceOrdinalOutOfRange);
  CHECK(devices_of(loaded) == std::vector<Device>(4, Device::cpu()));
  CHECK_FALSE(opened.storages().front()->is_placed());
  check_nothing_left(*backend);
  // "cpu:5" is the CPU, as torch's t.to("cpu:5").
  pthload::device::move_storages(loaded, Device::cuda(1), {}, backend);
  pthload::device::move_storages(loaded, {Device::Type::kCpu, 5}, {}, backend);
  CHECK(devices_of(loaded) == std::vector<Device>(4, Device::cpu()));
  check_nothing_left(*backend);
}

TEST_CASE("device pipeline: a byte hold outlives its checkpoint") {
  const auto file = many_storages(3, {100});
  const auto reference = pthload::load(file.path(), {.map_location = pthload::map_to("cpu")});
  const auto expected = reference.tensor("t1").contiguous_bytes();
  std::shared_ptr<const void> held;
  const std::byte* bytes = nullptr;
  {
    const auto checkpoint = pthload::load(
        file.path(), {.map_location = pthload::map_to("cpu"), .copy_cpu_storages = true});
    held = checkpoint.tensor("t1").hold_bytes();
    bytes = checkpoint.tensor("t1").data();
  }
  CHECK(std::memcmp(bytes, expected.data(), expected.size()) == 0);
  held.reset();
}

TEST_CASE("device pipeline: floating storages converted on load, on the GPU and on the CPU") {
  const auto file = many_storages(30, {3, 700, 20'000});
  const auto reference = pthload::load(file.path(), {.map_location = pthload::map_to("cpu")});
  auto backend = std::make_shared<HostBackend>();
  for (const Dtype target : {Dtype::kBFloat16, Dtype::kFloat16, Dtype::kFloat8E4M3FN}) {
    CAPTURE(pthload::dtype_name(target));
    for (const char* where : {"cpu", "cuda:0"}) {
      CAPTURE(where);
      pthload::LoadOptions options{.map_location = pthload::map_to(where)};
      options.floating_dtype = target;
      const auto checkpoint = load_on(backend, file.path(), options);
      for (std::size_t i = 0; i < reference.tensors().size(); ++i) {
        const auto& before = reference.tensors()[i].tensor;
        const auto& after = checkpoint.tensors()[i].tensor;
        CHECK(after.dtype() == target);
        CHECK(after.storage().dtype() == target);
        CHECK(after.storage().nbytes() == before.numel() * pthload::element_size(target));
        std::vector<std::byte> expected(after.storage().nbytes());
        pthload::device::cpu::convert(before.storage().bytes(), Dtype::kFloat32, expected, target,
                                      before.numel());
        const auto* got = static_cast<const std::byte*>(std::string_view(where) == "cpu"
                                                            ? after.storage().bytes().data()
                                                            : after.storage().device_pointer());
        CHECK(std::memcmp(got, expected.data(), expected.size()) == 0);
      }
    }
  }
  check_nothing_left(*backend);
  // A target that is not convertible fails before any byte is placed (it failed after all of
  // them were), on the CPU and on a GPU alike.
  auto fresh = std::make_shared<HostBackend>();
  for (const char* where : {"cpu", "cuda:0"}) {
    CAPTURE(where);
    std::uint64_t placed = 0;
    pthload::LoadOptions options{.map_location = pthload::map_to(where), .copy_cpu_storages = true};
    options.floating_dtype = Dtype::kInt32;
    options.cuda.progress = [&](std::uint64_t bytes, std::uint64_t) { placed = bytes; };
    // open() places nothing, and leaves the placing options (this one too) to load().
    auto opened = pthload::open(file.path(), options);
    CHECK(error_code_of([&] { pthload::device::place_storages(opened, options, fresh); }) ==
          Errc::kDeviceBadOptions);
    CHECK(placed == 0);
    CHECK(fresh->counts().allocate_calls == 0);
    for (const auto& storage : opened.storages())
      CHECK_FALSE(storage->is_placed());
  }
  check_nothing_left(*fresh);
}

TEST_SUITE("fixtures") {
  TEST_CASE("device: floating_dtype converts float storages and leaves the others") {
    const std::string path = std::string(PTHLOAD_FIXTURES_DIR) + "/torch/torch-2.15.0/dtypes.pt";
    const auto reference = pthload::load(path, {.map_location = pthload::map_to("cpu")});
    pthload::LoadOptions options{.map_location = pthload::map_to("cpu")};
    options.floating_dtype = Dtype::kBFloat16;
    const auto converted = pthload::load(path, options);
    REQUIRE(converted.tensors().size() == reference.tensors().size());
    std::size_t changed = 0;
    for (std::size_t i = 0; i < reference.tensors().size(); ++i) {
      const auto& before = reference.tensors()[i].tensor;
      const auto& after = converted.tensors()[i].tensor;
      CAPTURE(reference.tensors()[i].name);
      if (!before.has_storage()) continue;
      // float8 tensors too, though torch 2.x saves them over untyped (uint8) storages.
      const bool floating = pthload::device::cpu::is_convertible(before.dtype());
      CHECK(after.dtype() == (floating ? Dtype::kBFloat16 : before.dtype()));
      if (!floating) {
        CHECK(after.content_checksum() == before.content_checksum());
        continue;
      }
      ++changed;
      const auto source = before.storage().bytes();
      const std::size_t count = source.size() / pthload::element_size(before.dtype());
      std::vector<std::byte> expected(count * 2);
      pthload::device::cpu::convert(source, before.dtype(), expected, Dtype::kBFloat16, count);
      const auto got = after.storage().bytes();
      CHECK(std::vector<std::byte>(got.begin(), got.end()) == expected);
    }
    // float32, float16, bfloat16, float8_e5m2 and float8_e4m3fn, each with its view.
    CHECK(changed == 10);
  }

  TEST_CASE("device: floating_dtype converts on the GPU what it converts on the CPU") {
    const std::string path = std::string(PTHLOAD_FIXTURES_DIR) + "/torch/torch-2.15.0/dtypes.pt";
    pthload::LoadOptions options{.map_location = pthload::map_to("cpu")};
    options.floating_dtype = Dtype::kFloat16;
    const auto on_cpu = pthload::load(path, options);
    auto backend = std::make_shared<HostBackend>();
    options.map_location = pthload::map_to("cuda:0");
    const auto on_gpu = load_on(backend, path, options);
    REQUIRE(on_gpu.storages().size() == on_cpu.storages().size());
    for (std::size_t i = 0; i < on_cpu.storages().size(); ++i) {
      const auto& cpu = *on_cpu.storages()[i];
      const auto& gpu = *on_gpu.storages()[i];
      CAPTURE(cpu.key());
      CHECK(gpu.dtype() == cpu.dtype());
      REQUIRE(gpu.nbytes() == cpu.nbytes());
      if (cpu.nbytes() > 0) {
        CHECK(std::memcmp(gpu.device_pointer(), cpu.bytes().data(), cpu.nbytes()) == 0);
      }
    }
    CHECK(on_gpu.tensor("float8_e4m3fn").dtype() == Dtype::kFloat16);
  }
}

TEST_CASE("device: views made as devices are decided leave every storage as views made after") {
  using pthload::device::ViewsPlaced;
  const auto file = mixed_storages();
  auto backend = std::make_shared<HostBackend>();
  std::vector<std::vector<std::string>> placed;
  for (const auto views : {ViewsPlaced::kAfterDecisions, ViewsPlaced::kAsDecided}) {
    CAPTURE(static_cast<int>(views));
    auto checkpoint = pthload::open(file.path());
    pthload::LoadOptions options;
    std::uint64_t progressed = 0;
    std::uint64_t total = 0;
    options.cuda.progress = [&](std::uint64_t done, std::uint64_t all) {
      progressed = done;
      total = all;
    };
    pthload::device::place_storages(checkpoint, options, backend, nullptr, views);
    CHECK(total == 18 * sizeof(float));
    CHECK(progressed == total);
    CHECK(pthload::internal::Access::state(checkpoint).placed_bytes == total);
    placed.push_back(placements(checkpoint));
    const auto& storages = checkpoint.storages();
    REQUIRE(storages.size() == 5);
    CHECK(storages[0]->is_file_view());
    CHECK(storages[1]->device() == Device::cuda(0));
    CHECK_FALSE(storages[2]->is_file_view());  // inflated: an owned buffer
    CHECK(storages[3]->is_file_view());
    CHECK(storages[4]->device() == Device::cuda(0));
    CHECK(checkpoint.tensor("t3").storage().bytes().size() == 2 * sizeof(float));
  }
  CHECK(placed[0] == placed[1]);
  check_nothing_left(*backend);
}

TEST_CASE("device: a device that cannot be decided leaves views made before it only as decided") {
  using pthload::device::ViewsPlaced;
  const auto file = mixed_storages();
  // No backend: storage '1' (cuda:0) fails after storage '0' was decided for the CPU.
  for (const auto views : {ViewsPlaced::kAfterDecisions, ViewsPlaced::kAsDecided}) {
    CAPTURE(static_cast<int>(views));
    auto checkpoint = pthload::open(file.path());
    CHECK(error_code_of([&] {
            pthload::device::place_storages(checkpoint, {}, nullptr, nullptr, views);
          }) == Errc::kDeviceCudaUnavailable);
    const auto& storages = checkpoint.storages();
    CHECK(storages[0]->is_placed() == (views == ViewsPlaced::kAsDecided));
    for (std::size_t i = 1; i < storages.size(); ++i)
      CHECK_FALSE(storages[i]->is_placed());
  }
}
