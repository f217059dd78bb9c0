// load() on the real torch.save fixtures whose storages carry CUDA tags (tests/fixtures/torch).
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/error_code.hpp"

using pthload::Device;
using pthload::Errc;

namespace {
const char* const kCudaFixtures[] = {"torch/torch-1.13.0/cuda.pt", "torch/torch-2.15.0/cuda.pt"};

std::string fixture(const char* name) {
  return std::string(PTHLOAD_FIXTURES_DIR) + "/" + name;
}
}  // namespace

TEST_SUITE("fixtures") {
  TEST_CASE("device: cuda-tagged fixtures fail by default and load with each map_location form") {
    for (const char* name : kCudaFixtures) {
      CAPTURE(name);
      const std::string path = fixture(name);
      // Tagged cuda:0 and cuda:3: refused without a GPU, or with fewer than four.
      const int gpus = pthload::cuda_device_count();
      if (gpus < 4) {
        CHECK(pthload::test::error_code_of([&] { (void)pthload::load(path); }) ==
              (gpus == 0 ? Errc::kDeviceCudaUnavailable : Errc::kDeviceOrdinalOutOfRange));
      }

      const auto by_string = pthload::load(path, {.map_location = pthload::map_to("cpu")});
      const auto by_dict = pthload::load(
          path, {.map_location = pthload::map_dict({{"cuda:0", "cpu"}, {"cuda:3", "cpu"}})});
      std::set<std::string> tags;
      const auto by_callable = pthload::load(
          path, {.map_location = [&](const pthload::StorageInfo&, std::string_view tag) {
            tags.emplace(tag);
            return std::optional(Device::cpu());
          }});
      CHECK(tags == std::set<std::string>{"cpu", "cuda:0", "cuda:3"});
      for (const auto* checkpoint : {&by_string, &by_dict, &by_callable}) {
        REQUIRE(checkpoint->tensors().size() == by_string.tensors().size());
        for (std::size_t i = 0; i < checkpoint->tensors().size(); ++i) {
          const auto& tensor = checkpoint->tensors()[i].tensor;
          CHECK(tensor.device() == Device::cpu());
          CHECK(tensor.content_checksum() == by_string.tensors()[i].tensor.content_checksum());
        }
      }
    }
  }
}
