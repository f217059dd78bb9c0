// The `cuda` suite: the real thing on a machine with an NVIDIA GPU. Every torch fixture loaded
// onto cuda:0 equals its CPU load byte for byte; every kernel equals its CPU reference; an
// allocation failure releases everything. Without a GPU it says so and exits 77 (meson: skip).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "device/backend.hpp"
#include "device/cpu/kernels.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"

using pthload::Device;
using pthload::Dtype;
using pthload::Errc;
using pthload::test::error_thrown;

namespace {

std::vector<std::filesystem::path> torch_fixtures() {
  return pthload::test::fixture_files("torch", pthload::test::has_extension(".pt"));
}

std::vector<std::byte> to_host(const void* device, std::size_t bytes) {
  auto backend = pthload::device::cuda_backend();
  std::vector<std::byte> host(bytes);
  backend->use_device(0);
  auto* stream = backend->create_stream(0);
  backend->copy_to_host(host.data(), device, bytes, stream);
  backend->destroy_stream(stream);
  return host;
}

}  // namespace

TEST_CASE("cuda: every fixture loaded onto cuda:0 equals its CPU load") {
  std::size_t loaded = 0;
  for (const auto& path : torch_fixtures()) {
    CAPTURE(path.string());
    std::optional<pthload::Checkpoint> on_cpu;
    try {
      on_cpu.emplace(pthload::load(path, {.map_location = pthload::map_to("cpu")}));
    } catch (const pthload::Error&) {
      continue;  // a fixture pthload refuses on the CPU too (hostile or unsupported)
    }
    const auto on_gpu = pthload::load(path, {.map_location = pthload::map_to("cuda:0")});
    REQUIRE(on_gpu.storages().size() == on_cpu->storages().size());
    for (std::size_t i = 0; i < on_cpu->storages().size(); ++i) {
      const auto& cpu = *on_cpu->storages()[i];
      const auto& gpu = *on_gpu.storages()[i];
      if (!cpu.is_placed() || cpu.device() != Device::cpu()) continue;
      if (cpu.is_in_pickle()) continue;  // numpy arrays stay on the CPU, as in torch
      CHECK(gpu.device() == Device::cuda(0));
      if (cpu.nbytes() == 0) continue;
      CHECK(to_host(gpu.device_pointer(), cpu.nbytes()) ==
            std::vector<std::byte>(cpu.bytes().begin(), cpu.bytes().end()));
    }
    ++loaded;
  }
  CHECK(loaded > 20);
}

TEST_CASE("cuda: Checkpoint::to round-trips through the GPU") {
  const std::string path = std::string(PTHLOAD_FIXTURES_DIR) + "/torch/torch-2.15.0/module.pt";
  const auto reference = pthload::load(path, {.map_location = pthload::map_to("cpu")});
  auto checkpoint = pthload::load(path, {.map_location = pthload::map_to("cpu")});
  checkpoint.to(Device::cuda(0));
  CHECK(checkpoint.storages().front()->device() == Device::cuda(0));
  checkpoint.to(Device::cpu());
  for (std::size_t i = 0; i < reference.storages().size(); ++i) {
    const auto a = checkpoint.storages()[i]->bytes();
    const auto b = reference.storages()[i]->bytes();
    CHECK(std::vector<std::byte>(a.begin(), a.end()) == std::vector<std::byte>(b.begin(), b.end()));
  }
}

TEST_CASE("cuda: every kernel equals its CPU reference") {
  auto backend = pthload::device::cuda_backend();
  backend->use_device(0);
  auto* stream = backend->create_stream(0);
  std::mt19937 random(7);
  constexpr std::size_t kCount = (1 << 20) + 13;  // a tail past the 16-byte vectors
  std::vector<std::byte> input(kCount * 4);
  for (auto& b : input)
    b = static_cast<std::byte>(random());
  auto* device_in = backend->allocate(0, input.size());
  auto* device_out = backend->allocate(0, input.size());
  const auto upload = [&] {
    backend->copy_to_device(device_in, input.data(), input.size(), stream);
    backend->synchronize(stream);
  };
  for (const std::size_t unit : {2, 4, 8}) {
    CAPTURE(unit);
    upload();
    backend->byteswap(device_in, input.size() - input.size() % unit, unit, stream);
    auto expected = input;
    pthload::device::cpu::byteswap(std::span(expected).first(input.size() - input.size() % unit),
                                   unit);
    CHECK(to_host(device_in, input.size()) == expected);
  }
  const Dtype types[] = {Dtype::kFloat32, Dtype::kBFloat16, Dtype::kFloat16, Dtype::kFloat8E4M3FN,
                         Dtype::kFloat8E5M2};
  upload();
  for (const Dtype from : types) {
    for (const Dtype to : types) {
      if (from == to) continue;
      CAPTURE(pthload::dtype_name(from));
      CAPTURE(pthload::dtype_name(to));
      backend->convert(device_in, from, device_out, to, kCount, stream);
      std::vector<std::byte> expected(kCount * pthload::element_size(to));
      pthload::device::cpu::convert(input, from, expected, to, kCount);
      CHECK(to_host(device_out, expected.size()) == expected);
    }
  }
  pthload::device::StridedView view{.element_size = 2, .dims = 3, .offset = 5};
  const std::int64_t sizes[] = {7, 33, 100};
  const std::int64_t strides[] = {1, 7 * 101, 7};
  for (std::size_t d = 0; d < 3; ++d) {
    view.sizes[d] = sizes[d];
    view.strides[d] = strides[d];
  }
  REQUIRE(pthload::device::cpu::strided_extent(view) <= input.size());
  backend->make_contiguous(device_in, view, device_out, stream);
  std::vector<std::byte> expected(pthload::device::cpu::element_count(view) * 2);
  pthload::device::cpu::make_contiguous(input.data(), view, expected.data());
  CHECK(to_host(device_out, expected.size()) == expected);
  backend->free(0, device_in);
  backend->free(0, device_out);
  backend->destroy_stream(stream);
}

TEST_CASE("cuda: an allocation failure is an error naming storage and device, and frees all") {
  const std::string path = std::string(PTHLOAD_FIXTURES_DIR) + "/torch/torch-2.15.0/module.pt";
  int allocations = 0;
  int live = 0;
  pthload::LoadOptions options{.map_location = pthload::map_to("cuda:0")};
  options.cuda.arena_storage_bytes = 0;
  options.cuda.allocator.allocate = [&](int, std::size_t bytes) -> void* {
    if (++allocations == 2) return nullptr;
    ++live;
    return pthload::device::cuda_backend()->allocate(0, bytes);
  };
  options.cuda.allocator.deallocate = [&](int, void* pointer, std::size_t) {
    --live;
    pthload::device::cuda_backend()->free(0, pointer);
  };
  const auto e = error_thrown<pthload::DeviceError>([&] { (void)pthload::load(path, options); });
  CHECK(e.code() == Errc::kDeviceAllocationFailed);
  CHECK(std::string(e.what()).find("cuda:0") != std::string::npos);
  CHECK(live == 0);
  CHECK(pthload::test::error_code_of([&] {
          (void)pthload::load(
              path, {.map_location = pthload::map_to(Device::cuda(pthload::cuda_device_count()))});
        }) == Errc::kDeviceOrdinalOutOfRange);
}

int main(int argc, char** argv) {
  if (pthload::cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device (%s); the cuda suite runs only on a machine with a GPU\n",
                pthload::device::built_with_cuda() ? "none found" : "this build has no CUDA");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
