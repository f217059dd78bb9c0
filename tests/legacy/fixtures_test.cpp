// The legacy torch.save fixtures (tests/fixtures/torch/*/legacy_*.pt, made by torch 1.13 and a
// newer torch with _use_new_zipfile_serialization=False): load in view and copy mode, equal
// contents. Names, shapes and checksums against torch: tests/tools/fixtures_crosscheck_test.py.
#include <doctest/doctest.h>

#include <filesystem>

#include "pthload/checkpoint.hpp"

TEST_SUITE("fixtures") {
  TEST_CASE("legacy: every legacy fixture loads, views and copies agree") {
    const std::filesystem::path root = std::filesystem::path(PTHLOAD_FIXTURES_DIR) / "torch";
    int files = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      const auto name = entry.path().filename().string();
      if (!name.starts_with("legacy_") || entry.path().extension() != ".pt") continue;
      ++files;
      INFO(entry.path().string());
      const auto cpu = pthload::map_to(pthload::Device::cpu());
      const auto views = pthload::load(entry.path(), {.map_location = cpu});
      const auto copies =
          pthload::load(entry.path(), {.map_location = cpu, .copy_cpu_storages = true});
      CHECK(views.format() == pthload::Format::kLegacy);
      REQUIRE(views.tensors().size() == copies.tensors().size());
      CHECK(!views.tensors().empty());
      for (std::size_t i = 0; i < views.tensors().size(); ++i) {
        CHECK(views.tensors()[i].name == copies.tensors()[i].name);
        CHECK(views.tensors()[i].tensor.content_checksum() ==
              copies.tensors()[i].tensor.content_checksum());
      }
    }
    CHECK(files >= 10);
  }
}
