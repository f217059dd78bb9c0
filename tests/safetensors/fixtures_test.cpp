// The files Python's safetensors wrote (tests/fixtures/safetensors/, made by
// tests/fixtures/make_safetensors_fixtures.py): they load as views and as copies with equal
// contents, with their metadata. Names, shapes and checksums against what safetensors read
// back: tests/tools/fixtures_crosscheck_test.py.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "pthload/checkpoint.hpp"
#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"

namespace {

// Whether `file` has any part of the file mapped: a mapping, or an io=map image's mapping for
// views beside its pread image.
bool maps_file(const pthload::common::MappedFile& file) {
  return file.is_mapped() || file.view_bytes().data() != file.bytes().data();
}

std::filesystem::path fixture(const std::string& name) {
  return std::filesystem::path(PTHLOAD_FIXTURES_DIR) / "safetensors" / (name + ".safetensors");
}

}  // namespace

TEST_SUITE("fixtures") {
  TEST_CASE("safetensors: every fixture loads; views and copies agree") {
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(fixture("dtypes").parent_path())) {
      if (entry.path().extension() != ".safetensors") continue;
      ++files;
      INFO(entry.path().string());
      const auto views = pthload::load(entry.path());
      const auto copies = pthload::load(entry.path(), {.copy_cpu_storages = true});
      // io=read (the file read whole with pread, never mapped) gives the copies' bytes too.
      const auto read = pthload::load(entry.path(), {.io = pthload::IoStrategy::kRead});
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

  TEST_CASE("safetensors: the dtypes fixture holds every dtype safetensors.torch writes") {
    const auto checkpoint = pthload::open(fixture("dtypes"));
    CHECK(checkpoint.tensors().size() == 20);
    for (const auto& named : checkpoint.tensors()) {
      // Each tensor is named after its torch dtype.
      CHECK(pthload::dtype_name(named.tensor.dtype()) == named.name);
    }
    CHECK(checkpoint.tensor("float4_e2m1fn_x2").sizes()[1] == 3);  // F4 [2, 6] in the header
  }

  TEST_CASE("safetensors: __metadata__ comes through as written") {
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
