// Legacy (pre-1.6) torch.save files through open() and load(): the torch.save fixtures
// (tests/fixtures/torch/*/legacy_*.pt, made by torch 1.13 and a newer torch with
// _use_new_zipfile_serialization=False) load in view and copy mode with equal contents, and
// torch 0.1's tar format is refused clearly. Names, shapes and checksums against torch:
// tests/tools/fixtures_crosscheck_test.py.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/bytes.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "support/legacy_builder.hpp"

using pthload::Errc;
using pthload::test::bytes_of;
using pthload::test::error_code_of;
using pthload::test::TempPath;
namespace lb = pthload::test::legacy_build;

namespace {

Errc open_code(const std::string& text) {
  const TempPath file(bytes_of(text));
  return error_code_of([&] { (void)pthload::open(file.path()); });
}

}  // namespace

TEST_CASE("formats legacy: tar-format checkpoints are refused clearly") {
  std::string tar(1024, '\0');
  std::memcpy(tar.data(), "storages", 8);
  std::memcpy(tar.data() + 257, "ustar", 5);
  CHECK(open_code(tar) == Errc::kLegacyTarUnsupported);
  CHECK(open_code(lb::magic(false) + lb::protocol()) == Errc::kLegacyBadMagic);
}

TEST_SUITE("fixtures") {
  TEST_CASE("formats legacy: every legacy fixture loads, views and copies agree") {
    int files = 0;
    for (const auto& path : pthload::test::fixture_files("torch", [](const auto& path) {
           return path.filename().string().starts_with("legacy_") && path.extension() == ".pt";
         })) {
      ++files;
      INFO(path.string());
      const auto cpu = pthload::map_to(pthload::Device::cpu());
      const auto views = pthload::load(path, {.map_location = cpu});
      const auto copies = pthload::load(path, {.map_location = cpu, .copy_cpu_storages = true});
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
