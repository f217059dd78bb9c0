// pthload::open and load over safetensors files: the same Checkpoint, storages and placement as
// torch.save files, on files built here and on the files Python's safetensors wrote
// (tests/fixtures/safetensors/, made by tests/fixtures/make_safetensors_fixtures.py), which load
// as views and as copies with equal contents, with their metadata. Names, shapes and checksums
// against what safetensors read back: tests/tools/fixtures_crosscheck_test.py.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "formats/formats_test_support.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/bytes.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "support/safetensors_builder.hpp"

using pthload::Errc;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::fixture_files;
using pthload::test::has_extension;
using pthload::test::maps_file;
using pthload::test::TempPath;
namespace sb = pthload::test::safetensors_build;

namespace {

std::vector<float> floats_of(const pthload::Tensor& tensor) {
  const auto bytes = tensor.contiguous_bytes();
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// "w": float32 (2, 3) = 0..5, then "b": float32 (2,) = 6, 7; the header padded with spaces to
// a multiple of 8 bytes, or to `size` bytes.
std::vector<std::byte> two_tensors(std::size_t size = 0) {
  std::string header = R"({"__metadata__":{"format":"pt"},)" +
                       sb::tensor("w", "F32", "[2,3]", 0, 24) + "," +
                       sb::tensor("b", "F32", "[2]", 24, 32) + "}";
  header.resize(size != 0 ? size : (header.size() + 7) / 8 * 8, ' ');
  return sb::file(header, pthload::test::float_record(8));
}

std::filesystem::path fixture(const std::string& name) {
  return pthload::test::fixture_path("safetensors") / (name + ".safetensors");
}

}  // namespace

TEST_CASE("formats safetensors: open() lists the tensors over one storage each, reading no data") {
  const TempPath file(two_tensors());
  const auto checkpoint = pthload::open(file.path());
  CHECK(checkpoint.format() == pthload::Format::kSafetensors);
  CHECK(pthload::format_name(checkpoint.format()) == "safetensors");
  REQUIRE(checkpoint.tensors().size() == 2);
  const auto& w = checkpoint.tensors()[0];
  CHECK(w.name == "w");
  CHECK(w.tensor.dtype() == pthload::Dtype::kFloat32);
  CHECK(std::vector(w.tensor.sizes().begin(), w.tensor.sizes().end()) ==
        std::vector<std::int64_t>{2, 3});
  CHECK(std::vector(w.tensor.strides().begin(), w.tensor.strides().end()) ==
        std::vector<std::int64_t>{3, 1});
  CHECK(w.tensor.storage_offset() == 0);
  CHECK(w.tensor.storage().key() == "w");
  CHECK(w.tensor.storage().location() == "cpu");
  CHECK(w.tensor.storage().nbytes() == 24);
  CHECK_FALSE(w.tensor.storage().is_placed());
  CHECK(checkpoint.storages().size() == 2);
  REQUIRE(checkpoint.metadata().size() == 1);
  CHECK(checkpoint.metadata()[0].first == "format");
  CHECK(checkpoint.metadata()[0].second == "pt");
  CHECK(checkpoint.opaque_values().empty());
}

TEST_CASE("formats safetensors: load() views the file where aligned, copies on request") {
  const TempPath file(two_tensors());
  const auto views = pthload::load(file.path());
  CHECK(views.tensors()[0].tensor.storage().is_file_view());
  CHECK(floats_of(views.tensors()[0].tensor) == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(floats_of(views.tensors()[1].tensor) == std::vector<float>{6, 7});
  const auto copies = pthload::load(file.path(), {.copy_cpu_storages = true});
  CHECK_FALSE(copies.tensors()[1].tensor.storage().is_file_view());
  CHECK(floats_of(copies.tensors()[1].tensor) == std::vector<float>{6, 7});
  CHECK(copies.tensors()[1].tensor.content_checksum() ==
        views.tensors()[1].tensor.content_checksum());
}

TEST_CASE("formats safetensors: data that is not aligned for its dtype is copied, not viewed") {
  // Other writers need not pad the header to 8 bytes.
  std::string header = "{" + sb::tensor("w", "F32", "[2]", 0, 8) + "}";
  if ((8 + header.size()) % 4 == 0) header += ' ';
  const TempPath file(sb::file(header, pthload::test::float_record(2)));
  const auto checkpoint = pthload::load(file.path());
  CHECK_FALSE(checkpoint.tensors()[0].tensor.storage().is_file_view());
  CHECK(floats_of(checkpoint.tensors()[0].tensor) == std::vector<float>{0, 1});
}

TEST_CASE("formats safetensors: map_location places safetensors storages like any others") {
  const TempPath file(two_tensors());
  const auto meta = pthload::load(file.path(), {.map_location = pthload::map_to("meta")});
  CHECK(meta.tensors()[0].tensor.device() == pthload::Device::meta());
  int calls = 0;
  const auto chosen = pthload::load(
      file.path(), {.map_location = [&](const pthload::StorageInfo&, std::string_view tag) {
        ++calls;
        CHECK(tag == "cpu");
        return std::optional(pthload::Device::cpu());
      }});
  CHECK(calls == 2);
  CHECK(floats_of(chosen.tensors()[1].tensor) == std::vector<float>{6, 7});
}

TEST_CASE("formats safetensors: a header size whose low byte is 0x80 is still safetensors") {
  // 0x80 is also PROTO, the first byte of a legacy stream: safetensors is checked first.
  const auto bytes = two_tensors(256 + 128);
  REQUIRE(bytes[0] == std::byte{0x80});
  const TempPath file(bytes);
  CHECK(pthload::open(file.path()).format() == pthload::Format::kSafetensors);
}

TEST_CASE("formats safetensors: errors name the file and the offset") {
  auto bytes = two_tensors();
  bytes.pop_back();  // the last tensor now runs past the end of the file
  const TempPath file(bytes);
  const auto e = error_thrown<pthload::FormatError>([&] { (void)pthload::open(file.path()); });
  CHECK(e.code() == Errc::kSafetensorsTensorOutOfBounds);
  CHECK(e.context().path == file.path().string());
  CHECK(e.context().offset.has_value());
  CHECK(std::string(e.what()).find("'b'") != std::string::npos);
}

TEST_CASE("formats safetensors: a tensor() lookup by name, and a missing name") {
  const TempPath file(two_tensors());
  const auto checkpoint = pthload::load(file.path());
  CHECK(checkpoint.tensor("b").numel() == 2);
  CHECK(error_code_of([&] { (void)checkpoint.tensor("nope"); }) == Errc::kTorchNameNotFound);
}

TEST_SUITE("fixtures") {
  TEST_CASE("formats safetensors: every fixture loads; views and copies agree") {
    int files = 0;
    for (const auto& path : fixture_files("safetensors", has_extension(".safetensors"))) {
      ++files;
      INFO(path.string());
      const auto views = pthload::load(path);
      const auto copies = pthload::load(path, {.copy_cpu_storages = true});
      // io=read (the file read whole with pread, never mapped) gives the copies' bytes too.
      const auto read = pthload::load(path, {.io = pthload::IoStrategy::kRead});
      CHECK_FALSE(maps_file(*pthload::internal::Access::state(read).file));
      REQUIRE(read.tensors().size() == copies.tensors().size());
      for (std::size_t i = 0; i < read.tensors().size(); ++i) {
        CHECK(read.tensors()[i].tensor.content_checksum() ==
              copies.tensors()[i].tensor.content_checksum());
      }
      CHECK(views.format() == pthload::Format::kSafetensors);
      REQUIRE(views.tensors().size() == copies.tensors().size());
      for (std::size_t i = 0; i < views.tensors().size(); ++i) {
        const auto& view = views.tensors()[i].tensor;
        CHECK(views.tensors()[i].name == copies.tensors()[i].name);
        CHECK(view.is_contiguous());
        // save_file pads the header to 8 bytes and puts the widest dtypes first: every
        // non-empty tensor is aligned for its dtype, so viewed in place. (Placement asks 16
        // bytes of a uint8 storage, which in a torch file may hold any dtype.)
        if (view.nbytes() != 0 && view.dtype() != pthload::Dtype::kUInt8) {
          CHECK(view.storage().is_file_view());
        }
        CHECK(view.content_checksum() == copies.tensors()[i].tensor.content_checksum());
      }
    }
    CHECK(files >= 5);
  }

  TEST_CASE("formats safetensors: the dtypes fixture holds every dtype safetensors.torch writes") {
    const auto checkpoint = pthload::open(fixture("dtypes"));
    CHECK(checkpoint.tensors().size() == 20);
    for (const auto& named : checkpoint.tensors()) {
      // Each tensor is named after its torch dtype.
      CHECK(pthload::dtype_name(named.tensor.dtype()) == named.name);
    }
    CHECK(checkpoint.tensor("float4_e2m1fn_x2").sizes()[1] == 3);  // F4 [2, 6] in the header
  }

  TEST_CASE("formats safetensors: __metadata__ comes through as written") {
    const auto checkpoint = pthload::open(fixture("metadata"));
    const auto metadata = checkpoint.metadata();
    REQUIRE(metadata.size() == 4);
    CHECK(metadata[0] == std::pair<std::string, std::string>{"empty", ""});
    CHECK(metadata[1] == std::pair<std::string, std::string>{"format", "pt"});
    CHECK(metadata[2] == std::pair<std::string, std::string>{"json", R"({"a": [1, 2]})"});
    CHECK(metadata[3] == std::pair<std::string, std::string>{"note", "caf\xc3\xa9 \xe2\x98\x83"});
    CHECK(pthload::open(fixture("no_tensors")).tensors().empty());
  }
}
