// What placement leaves out (issue 14): map_location's kSkipStorage, a partial load through the
// GPU pipeline, and load_slice, on files the real torch wrote
// (tests/fixtures/make_partial_fixtures.py). That a slice reads only its own bytes is shown by
// slicing a copy of the file whose other pages are unreadable (PROT_NONE), where any read of them
// kills the process — and a control that does read them crashes.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "device/host_backend.hpp"
#include "device/place.hpp"
#include "device/select_slice.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/slice.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/partial_loads.hpp"

using pthload::Errc;
using pthload::IoStrategy;
using pthload::test::checkpoint_file;
using pthload::test::crashes;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::file_range_of;
using pthload::test::float_record;
using pthload::test::load_with;
using pthload::test::names_of;
using pthload::test::open_with;
using pthload::test::PickleWriter;
using pthload::test::ProtectedCopy;

namespace {

const auto& kFixtures = pthload::test::kPartialFixtures;

}  // namespace

TEST_CASE("device: a slice without elements keeps torch's strides, even beside huge sizes") {
  // The empty tensor torch loads from such a file (sizes [3, 0, 2^62, 2^62], strides 0):
  // contiguous strides for it overflow int64; torch's narrow().contiguous() keeps the view's.
  constexpr std::int64_t kHuge = std::int64_t{1} << 62;
  PickleWriter p;
  p.empty_dict().mark();
  p.str("empty").tensor_v2("FloatStorage", "0", 0, 0, {3, 0, kHuge, kHuge}, {0, 0, 0, 0});
  p.str("rows").tensor_v2("FloatStorage", "1", 6, 0, {3, 2}, {2, 1});
  p.setitems().stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = ""},
                                                {.name = "ck/data/1", .data = float_record(6)}});
  const auto opened = pthload::open(file.path());
  for (const auto& [dim, begin, end] : std::vector<std::tuple<int, std::int64_t, std::int64_t>>{
           {0, 0, 3}, {0, 1, 2}, {-1, 0, kHuge}, {-1, kHuge - 1, kHuge}}) {
    CAPTURE(dim);
    CAPTURE(begin);
    const auto slice = pthload::load_slice(opened, "empty", dim, begin, end);
    CHECK(slice.numel() == 0);
    CHECK(slice.nbytes() == 0);
    CHECK(std::vector(slice.strides().begin(), slice.strides().end()) ==
          std::vector<std::int64_t>{0, 0, 0, 0});
    CHECK(slice.sizes()[dim == 0 ? 0 : 3] == end - begin);
  }
  // An empty range of a tensor with elements: the tensor's strides, as narrow() gives.
  const auto none = pthload::load_slice(opened, "rows", 0, 1, 1);
  CHECK(std::vector(none.sizes().begin(), none.sizes().end()) == std::vector<std::int64_t>{0, 2});
  CHECK(std::vector(none.strides().begin(), none.strides().end()) ==
        std::vector<std::int64_t>{2, 1});
  // With elements: contiguous strides.
  const auto column = pthload::load_slice(opened, "rows", -1, 1, 2);
  CHECK(std::vector(column.strides().begin(), column.strides().end()) ==
        std::vector<std::int64_t>{1, 1});
}

TEST_CASE("device: load_slice checks the device it is given, and names where a storage lies") {
  PickleWriter p;
  p.empty_dict().mark();
  p.str("rows").tensor_v2("FloatStorage", "0", 6, 0, {3, 2}, {2, 1});
  p.setitems().stop();
  const auto file = checkpoint_file(p.bytes(), {{.name = "ck/data/0", .data = float_record(6)}});
  const auto opened = pthload::open(file.path());
  const auto slice_onto = [&](pthload::Device device) {
    return pthload::load_slice(opened, "rows", 0, 0, 2, device);
  };
  // A type outside the enum (a cast integer) was placed nowhere and called "unknown".
  const pthload::Device bogus{static_cast<pthload::Device::Type>(7), 0};
  CHECK(error_code_of([&] { (void)slice_onto(bogus); }) == Errc::kDeviceUnsupportedType);
  CHECK(error_code_of([&] { (void)slice_onto(pthload::Device::cuda(-3)); }) ==
        Errc::kDeviceOrdinalOutOfRange);
  // torch's t.to("cpu:5") lands on "cpu"; so does a slice.
  CHECK(slice_onto({pthload::Device::Type::kCpu, 5}).device() == pthload::Device::cpu());
  CHECK(slice_onto({pthload::Device::Type::kMeta, 1}).device() == pthload::Device::meta());

  // A storage placed on meta has no bytes; the error said "a GPU".
  const auto on_meta = pthload::load(file.path(), {.map_location = pthload::map_to("meta")});
  const auto meta_error = error_thrown<pthload::UnsupportedError>(
      [&] { (void)pthload::load_slice(on_meta, "rows", 0, 0, 1); });
  CHECK(meta_error.code() == Errc::kSliceUnsupported);
  const std::string text = meta_error.what();
  CHECK(text.find("placed on meta") != std::string::npos);
  CHECK(text.find("GPU") == std::string::npos);
  auto backend = std::make_shared<pthload::device::HostBackend>();
  auto on_gpu = pthload::open(file.path());
  pthload::device::place_storages(on_gpu, {.map_location = pthload::map_to("cuda:0")}, backend);
  const auto gpu_error = error_thrown<pthload::UnsupportedError>(
      [&] { (void)pthload::load_slice(on_gpu, "rows", 0, 0, 1); });
  CHECK(std::string(gpu_error.what()).find("placed on cuda:0") != std::string::npos);
}

TEST_SUITE("fixtures") {
  TEST_CASE("device: map_location's kSkipStorage leaves a storage and its tensors out") {
    const auto path = kFixtures / "model.pt";
    std::vector<std::string> asked;
    const auto skip_big = [&](const pthload::StorageInfo& s, std::string_view) {
      asked.emplace_back(s.key);
      return s.nbytes > 64 * 1024 ? std::optional(pthload::kSkipStorage)
                                  : std::optional(pthload::Device::cpu());
    };
    const auto loaded = pthload::load(path, {.map_location = skip_big});
    CHECK(asked.size() == 5);  // once per storage
    CHECK(names_of(loaded) == std::vector<std::string>{"embed.weight", "head.weight",
                                                       "layers.0.bias", "layers.0.upper",
                                                       "layers.0.weight", "layers.1.scale"});
    CHECK(loaded.storages().size() == 4);
    CHECK(pthload::internal::Access::state(loaded).placed_bytes ==
          64 * 1024 + 64 * 1024 + 8 * 1024 + 6000);
    for (const auto& storage : loaded.storages())
      CHECK(storage->is_placed());

    // The same through the GPU pipeline (the host backend stands in for CUDA in CI).
    auto backend = std::make_shared<pthload::device::HostBackend>();
    auto opened = pthload::open(path);
    pthload::device::place_storages(opened,
                                    {.map_location =
                                         [](const pthload::StorageInfo& s, std::string_view) {
                                           return s.nbytes > 64 * 1024
                                                      ? std::optional(pthload::kSkipStorage)
                                                      : std::optional(pthload::Device::cuda(0));
                                         }},
                                    backend);
    CHECK(names_of(opened) == names_of(loaded));
    CHECK(pthload::internal::Access::state(opened).placed_bytes ==
          pthload::internal::Access::state(loaded).placed_bytes);
    REQUIRE(opened.storages().size() == loaded.storages().size());
    for (std::size_t i = 0; i < opened.storages().size(); ++i) {
      const auto& device = *opened.storages()[i];
      const auto expected = loaded.storages()[i]->bytes();
      CHECK(device.device() == pthload::Device::cuda(0));
      REQUIRE(device.device_pointer() != nullptr);
      CHECK(std::memcmp(device.device_pointer(), expected.data(), expected.size()) == 0);
    }
  }

  TEST_CASE("device: a partial load through the pipeline places only the chosen storages") {
    const auto path = kFixtures / "model.pt";
    const auto cpu = pthload::load(path, {.filter = {.only = {"layers.*"}}});
    auto backend = std::make_shared<pthload::device::HostBackend>();
    pthload::LoadOptions options{.map_location = pthload::map_to("cuda:0"),
                                 .filter = {.only = {"layers.*"}}};
    auto opened = pthload::open(path, options);
    pthload::device::PipelineReport report;
    pthload::device::place_storages(opened, options, backend, &report);
    REQUIRE(opened.storages().size() == cpu.storages().size());
    CHECK(pthload::internal::Access::state(opened).placed_bytes ==
          64 * 1024 + 8 * 1024 + 128 * 1024 + 6000);
    for (std::size_t i = 0; i < opened.storages().size(); ++i) {
      const auto& device = *opened.storages()[i];
      const auto expected = cpu.storages()[i]->bytes();
      CHECK(device.device() == pthload::Device::cuda(0));
      REQUIRE(device.device_pointer() != nullptr);
      CHECK(std::memcmp(device.device_pointer(), expected.data(), expected.size()) == 0);
    }
  }

  TEST_CASE("device: load_slice gives torch's narrow() of rows and columns") {
    // Both I/O strategies: each SUBCASE runs the case once more.
    IoStrategy io = IoStrategy::kMap;
    SUBCASE("io=map") {}
    SUBCASE("io=read") {
      io = IoStrategy::kRead;
    }
    const auto slices = pthload::test::partial_manifest("slice");
    REQUIRE(slices.size() == 16);
    for (const auto& row : slices) {
      const auto& file = row[0];
      const auto& name = row[1];
      const int dim = std::stoi(row[2]);
      const auto begin = std::stoll(row[3]);
      const auto end = std::stoll(row[4]);
      CAPTURE(file);
      CAPTURE(name);
      CAPTURE(dim);
      CAPTURE(begin);
      const auto opened = open_with(io, kFixtures / file);
      const auto slice = pthload::load_slice(opened, name, dim, begin, end);
      CHECK(fmt::format("{:016x}", slice.content_checksum()) == row[5]);
      CHECK(slice.is_contiguous());
      CHECK(slice.storage().is_placed());
      const auto& whole = opened.tensor(name);
      const auto axis =
          static_cast<std::size_t>(dim < 0 ? dim + static_cast<int>(whole.dim()) : dim);
      CHECK(slice.sizes()[axis] == end - begin);
      // From a loaded checkpoint (the storage on the CPU, here a copy) the same.
      const auto loaded = load_with(io, kFixtures / file, {.copy_cpu_storages = true});
      CHECK(pthload::load_slice(loaded, name, dim, begin, end).content_checksum() ==
            slice.content_checksum());
      // Through the pipeline onto a (host-backend) GPU: the same bytes.
      auto backend = std::make_shared<pthload::device::HostBackend>();
      const auto on_device = pthload::device::load_slice(opened, name, dim, begin, end,
                                                         pthload::Device::cuda(0), {}, backend);
      CHECK(on_device.device() == pthload::Device::cuda(0));
      const auto host = slice.contiguous_bytes();
      if (!host.empty()) {
        REQUIRE(on_device.storage().device_pointer() != nullptr);
        CHECK(std::memcmp(on_device.storage().device_pointer(), host.data(), host.size()) == 0);
      }
    }
  }

  TEST_CASE("device: load_slice refuses other dimensions, ranges and tensors it cannot slice") {
    const auto opened = pthload::open(kFixtures / "model.pt");
    const auto code = [&](const char* name, int dim, std::int64_t begin, std::int64_t end) {
      return error_code_of([&] { (void)pthload::load_slice(opened, name, dim, begin, end); });
    };
    CHECK(code("embed.weight", 0, 0, 17) == Errc::kSliceBadRange);
    CHECK(code("embed.weight", 0, 5, 4) == Errc::kSliceBadRange);
    CHECK(code("embed.weight", 0, -1, 4) == Errc::kSliceBadRange);   // [15, 4)
    CHECK(code("embed.weight", 0, -17, 4) == Errc::kSliceBadRange);  // before the start
    CHECK(code("embed.weight", 0, 0, -17) == Errc::kSliceBadRange);
    // Negative bounds count from the end, as Python's t[-12:-4] does.
    for (const int dim : {0, -1}) {
      const std::int64_t extent = dim == 0 ? 16 : 1024;
      CHECK(pthload::load_slice(opened, "embed.weight", dim, -12, -4).content_checksum() ==
            pthload::load_slice(opened, "embed.weight", dim, extent - 12, extent - 4)
                .content_checksum());
      CHECK(pthload::load_slice(opened, "embed.weight", dim, -extent, extent).content_checksum() ==
            pthload::load(kFixtures / "model.pt").tensor("embed.weight").content_checksum());
    }
    CHECK(code("embed.weight", 2, 0, 1) == Errc::kSliceBadRange);
    CHECK(code("embed.weight", -3, 0, 1) == Errc::kSliceBadRange);
    CHECK(code("nothing", 0, 0, 1) == Errc::kTorchNameNotFound);
    CHECK(error_code_of([&] {
            (void)pthload::load_slice(opened, "embed.weight", 0, 0, 1, pthload::kSkipStorage);
          }) == Errc::kSliceBadRange);
    // A row slice of a view that is contiguous works (layers.0.upper: rows 0-3 of
    // layers.0.weight) and equals the same rows of the tensor it views.
    CHECK(pthload::load_slice(opened, "layers.0.upper", 0, 1, 3).content_checksum() ==
          pthload::load_slice(opened, "layers.0.weight", 0, 1, 3).content_checksum());
  }

  TEST_CASE("device: a slice reads only its own bytes of the tensor") {
    for (const char* file : {"model.pt", "model.safetensors"}) {
      CAPTURE(file);
      struct Case {
        std::string name;
        int dim;
        std::int64_t begin;
        std::int64_t end;
      };
      const std::vector<Case> cases{{"embed.weight", 0, 4, 12},
                                    {"layers.1.weight", -1, 1000, 1001},
                                    {"layers.1.weight", 1, 4000, 4096},
                                    {"layers.1.weight", 0, 1, 3}};
      for (const Case& c : cases) {
        const std::string& name = c.name;
        const int dim = c.dim;
        const std::int64_t begin = c.begin;
        const std::int64_t end = c.end;
        CAPTURE(name);
        CAPTURE(begin);
        const auto bytes = pthload::test::file_bytes(kFixtures / file);
        ProtectedCopy copy(bytes);
        const auto opened = pthload::open(copy.bytes());
        const auto expected = pthload::load_slice(opened, name, dim, begin, end).content_checksum();
        const auto& tensor = opened.tensor(name);
        const auto range = file_range_of(tensor.storage());
        const std::uint64_t first = range.first;
        const std::uint64_t last = range.second;
        const std::uint64_t element = pthload::element_size(tensor.dtype());
        const auto rows = static_cast<std::uint64_t>(tensor.sizes()[0]);
        const auto row = static_cast<std::uint64_t>(tensor.sizes()[1]) * element;
        std::uint64_t protected_bytes = 0;
        if (dim == 0) {
          protected_bytes += copy.protect(first, first + static_cast<std::uint64_t>(begin) * row);
          protected_bytes += copy.protect(first + static_cast<std::uint64_t>(end) * row, last);
        } else {
          // Every row: what lies before the slice's columns and after them.
          for (std::uint64_t r = 0; r < rows; ++r) {
            const auto row_start = first + r * row;
            protected_bytes +=
                copy.protect(row_start, row_start + static_cast<std::uint64_t>(begin) * element);
            protected_bytes += copy.protect(row_start + static_cast<std::uint64_t>(end) * element,
                                            row_start + row);
          }
        }
        CHECK(protected_bytes * 3 >= last - first);  // most of the tensor is unreadable
        CHECK(pthload::load_slice(opened, name, dim, begin, end).content_checksum() == expected);
        // The control: reading the whole tensor from the protected copy dies.
        CHECK(crashes([&] {
          (void)pthload::load(copy.bytes(),
                              {.copy_cpu_storages = true, .filter = {.only = {name}}});
        }));
      }
    }
  }
}
