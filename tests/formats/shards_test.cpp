// Sharded checkpoints: an index (model.safetensors.index.json, pytorch_model.bin.index.json) and
// its shards open as one Checkpoint, from the index file or its directory; what the index and the
// shards must agree on, one case per refusal; and the shards written the way transformers'
// save_pretrained(max_shard_size=...) writes them (tests/fixtures/make_shard_fixtures.py)
// against the same state dict saved whole.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "formats/formats_test_support.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "support/partial_loads.hpp"
#include "support/safetensors_builder.hpp"

using pthload::Errc;
using pthload::IoStrategy;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::kPartialFixtures;
using pthload::test::load_with;
using pthload::test::maps_file;
using pthload::test::names_of;
using pthload::test::open_with;
using pthload::test::TempPath;
namespace fs = std::filesystem;
namespace sb = pthload::test::safetensors_build;

namespace {

const fs::path kFixtures = fs::path(PTHLOAD_FIXTURES_DIR) / "shards";

// A safetensors shard of uint8 tensors [4] named `names`.
std::vector<std::byte> shard(std::initializer_list<std::string> names) {
  std::string header = "{";
  std::uint64_t offset = 0;
  for (const auto& name : names) {
    if (offset != 0) header += ",";
    header += sb::tensor(name, "U8", "[4]", offset, offset + 4);
    offset += 4;
  }
  return sb::file(header + "}", std::string(offset, 'x'));
}

std::string index_of(const std::string& weight_map) {
  return R"({"metadata":{"total_size":12},"weight_map":{)" + weight_map + "}}";
}

// Two shards: a = {x, y}, b = {z}, and the index that says so.
void write_two_shards(const TempPath& dir,
                      const std::string& weight_map = R"("x":"a.safetensors","y":"a.safetensors",)"
                                                      R"("z":"b.safetensors")") {
  dir.write("a.safetensors", shard({"x", "y"}));
  dir.write("b.safetensors", shard({"z"}));
  dir.write("model.safetensors.index.json", index_of(weight_map));
}

Errc open_code(const fs::path& path) {
  return error_code_of([&] { (void)pthload::open(path); });
}

using Summary =
    std::map<std::string, std::tuple<pthload::Dtype, std::vector<std::int64_t>, std::uint64_t>>;

// Each tensor's dtype, shape and checksum, by name.
Summary summary(const pthload::Checkpoint& checkpoint) {
  Summary out;
  for (const auto& named : checkpoint.tensors()) {
    const auto sizes = named.tensor.sizes();
    out[named.name] = {
        named.tensor.dtype(), {sizes.begin(), sizes.end()}, named.tensor.content_checksum()};
  }
  return out;
}

}  // namespace

TEST_CASE(
    "formats shards: an index and its shards open as one checkpoint, from the file or the folder") {
  const auto dir = TempPath::folder();
  write_two_shards(dir);
  for (const auto& path : {dir.path(), dir.path() / "model.safetensors.index.json"}) {
    INFO(path.string());
    const auto checkpoint = pthload::load(path);
    CHECK(checkpoint.format() == pthload::Format::kSafetensors);
    REQUIRE(checkpoint.tensors().size() == 3);
    // Shards in name order, each in its own order.
    CHECK(checkpoint.tensors()[0].name == "x");
    CHECK(checkpoint.tensors()[1].name == "y");
    CHECK(checkpoint.tensors()[2].name == "z");
    CHECK(checkpoint.storages().size() == 3);
    CHECK(checkpoint.tensor("z").storage().is_placed());
    CHECK(checkpoint.tensor("z").contiguous_bytes().size() == 4);
    REQUIRE(checkpoint.metadata().size() == 1);
    CHECK(checkpoint.metadata()[0] == std::pair<std::string, std::string>{"total_size", "12"});
  }
}

TEST_CASE("formats shards: a folder's only *.index.json is its index") {
  const auto dir = TempPath::folder();
  write_two_shards(dir);
  fs::rename(dir.path() / "model.safetensors.index.json", dir.path() / "weights.index.json");
  CHECK(pthload::open(dir.path()).tensors().size() == 3);
}

TEST_CASE("formats shards: a folder without an index is refused, naming a lone checkpoint in it") {
  const auto dir = TempPath::folder();
  CHECK(open_code(dir.path()) == Errc::kShardNoIndex);
  dir.write("model.safetensors", shard({"x"}));
  const auto e = error_thrown<pthload::FormatError>([&] { (void)pthload::open(dir.path()); });
  CHECK(e.code() == Errc::kShardNoIndex);
  CHECK(std::string(e.what()).find("model.safetensors") != std::string::npos);
}

TEST_CASE("formats shards: an index that is no JSON object with a weight_map of names is refused") {
  const auto dir = TempPath::folder();
  dir.write("a.index.json", "{\"weight_map\": ");
  CHECK(open_code(dir.path() / "a.index.json") == Errc::kShardIndexBad);
  dir.write("b.index.json", R"({"metadata":{}})");
  CHECK(open_code(dir.path() / "b.index.json") == Errc::kShardIndexBad);
  dir.write("c.index.json", R"({"weight_map":{"x":3}})");
  CHECK(open_code(dir.path() / "c.index.json") == Errc::kShardIndexBad);
  dir.write("d.index.json", R"(["weight_map"])");
  CHECK(open_code(dir.path() / "d.index.json") == Errc::kShardIndexBad);
}

TEST_CASE(
    "formats shards: a shard name that is not a plain file name beside the index is refused") {
  const auto dir = TempPath::folder();
  for (const std::string name :
       {"../a.safetensors", "/etc/passwd", "sub/a.safetensors", "..", "a\\\\b.safetensors", ""}) {
    INFO(name);
    dir.write("model.safetensors.index.json", index_of(R"("x":")" + name + "\""));
    CHECK(open_code(dir.path()) == Errc::kShardNameUnsafe);
  }
}

TEST_CASE("formats shards: a tensor the index lists that its shard lacks is refused") {
  const auto dir = TempPath::folder();
  write_two_shards(dir, R"("x":"a.safetensors","y":"a.safetensors","z":"b.safetensors",)"
                        R"("w":"b.safetensors")");
  CHECK(open_code(dir.path()) == Errc::kShardTensorMissing);
}

TEST_CASE("formats shards: a tensor of a shard that the index does not list there is refused") {
  const auto dir = TempPath::folder();
  write_two_shards(dir, R"("x":"a.safetensors","z":"b.safetensors")");  // y: not listed
  CHECK(open_code(dir.path()) == Errc::kShardTensorUnlisted);
  write_two_shards(dir, R"("x":"a.safetensors","y":"b.safetensors","z":"b.safetensors")");
  CHECK(open_code(dir.path()) == Errc::kShardTensorUnlisted);
}

TEST_CASE("formats shards: shards of different formats are refused") {
  const auto dir = TempPath::folder();
  dir.write("a.safetensors", shard({"x"}));
  fs::copy_file(kFixtures / "bin" / "pytorch_model-00004-of-00004.bin", dir.path() / "b.bin");
  dir.write("model.safetensors.index.json",
            index_of(R"("x":"a.safetensors","model.step":"b.bin")"));
  CHECK(open_code(dir.path()) == Errc::kShardMixedFormats);
}

TEST_CASE("formats shards: a missing shard is an I/O error naming the shard") {
  const auto dir = TempPath::folder();
  write_two_shards(dir);
  fs::remove(dir.path() / "b.safetensors");
  const auto e = error_thrown<pthload::IoError>([&] { (void)pthload::open(dir.path()); });
  CHECK(e.context().path == (dir.path() / "b.safetensors").string());
}

TEST_CASE("formats shards: a shard that is no regular file is refused before it is opened") {
  // /dev/zero would be read without end, a FIFO would block the open: the index names them.
  const auto dir = TempPath::folder();
  write_two_shards(dir);
  fs::remove(dir.path() / "b.safetensors");
  fs::create_symlink("/dev/null", dir.path() / "b.safetensors");
  for (const auto io : {pthload::IoStrategy::kMap, pthload::IoStrategy::kRead}) {
    const auto e =
        error_thrown<pthload::IoError>([&] { (void)pthload::open(dir.path(), {.io = io}); });
    CHECK(e.code() == Errc::kIoOpenFailed);
    CHECK(e.context().path == (dir.path() / "b.safetensors").string());
  }
}

TEST_CASE("formats shards: a broken shard's error names the shard") {
  const auto dir = TempPath::folder();
  write_two_shards(dir);
  dir.write("b.safetensors", "not a checkpoint at all");
  const auto e = error_thrown<pthload::Error>([&] { (void)pthload::open(dir.path()); });
  CHECK(e.context().path == (dir.path() / "b.safetensors").string());
}

TEST_SUITE("fixtures") {
  TEST_CASE("formats shards: save_pretrained-style shards give the state dict saved whole") {
    const auto whole = summary(pthload::load(kFixtures / "whole.safetensors"));
    CHECK(whole.size() == 8);
    CHECK(summary(pthload::load(kFixtures / "whole.pt")) == whole);
    for (const auto& [folder, index, format] :
         {std::tuple{"safetensors", "model.safetensors.index.json", pthload::Format::kSafetensors},
          std::tuple{"bin", "pytorch_model.bin.index.json", pthload::Format::kZip}}) {
      INFO(folder);
      // A copy, a view, and io=read (which maps no shard: owned copies only).
      for (const int way : {0, 1, 2}) {
        const auto from_folder = pthload::load(
            kFixtures / folder,
            {.copy_cpu_storages = way == 1,
             .io = way == 2 ? pthload::IoStrategy::kRead : pthload::IoStrategy::kMap});
        CHECK(from_folder.format() == format);
        CHECK(summary(from_folder) == whole);
        CHECK(from_folder.storages().size() == 8);
        if (way == 2) {
          CHECK_FALSE(maps_file(*pthload::internal::Access::state(from_folder).file));
          for (const auto& storage : from_folder.storages()) {
            const auto& range = pthload::internal::Access::state(*storage).file_range;
            REQUIRE(range != nullptr);
            CHECK_FALSE(maps_file(*range->file));
          }
        } else {
          CHECK(from_folder.tensor("lm_head.weight").storage().is_file_view() == (way == 0));
        }
        REQUIRE(from_folder.metadata().size() == 1);
        CHECK(from_folder.metadata()[0].second == "520");
      }
      CHECK(summary(pthload::load(kFixtures / folder / index)) == whole);
    }
  }

  TEST_CASE("formats shards: a sharded checkpoint opens only the shards holding chosen tensors") {
    // Both I/O strategies: each SUBCASE runs the case once more.
    IoStrategy io = IoStrategy::kMap;
    SUBCASE("io=map") {}
    SUBCASE("io=read") {
      io = IoStrategy::kRead;
    }
    // A copy of the sharded folder without its first and last shards: what only needs the
    // second loads; what needs another fails on the missing file.
    const auto copy = TempPath::copy_of(kPartialFixtures / "sharded");
    const auto& folder = copy.path();
    fs::remove(folder / "model-00001-of-00003.safetensors");
    fs::remove(folder / "model-00003-of-00003.safetensors");
    const auto whole = load_with(io, kPartialFixtures / "model.safetensors");
    const auto part = load_with(io, folder, {.filter = {.only = {"layers.0.*"}}});
    CHECK(names_of(part) == std::vector<std::string>{"layers.0.bias", "layers.0.weight"});
    CHECK(pthload::internal::Access::state(part).shards.size() == 1);
    for (const auto& named : part.tensors())
      CHECK(named.tensor.content_checksum() == whole.tensor(named.name).content_checksum());
    // io=read maps neither the index nor a shard; io=map maps both.
    CHECK(maps_file(*pthload::internal::Access::state(part).file) == (io == IoStrategy::kMap));
    for (const auto& storage : part.storages()) {
      const auto& range = pthload::internal::Access::state(*storage).file_range;
      REQUIRE(range != nullptr);
      CHECK(maps_file(*range->file) == (io == IoStrategy::kMap));
    }
    CHECK(open_with(io, folder, {.filter = {.exclude = {"embed.*", "layers.1.*"}}})
              .tensors()
              .size() == 2);
    // Nothing chosen: no shard opened, an empty checkpoint of the index's format.
    const auto none = open_with(io, folder, {.filter = {.only = {"nothing"}}});
    CHECK(none.tensors().empty());
    CHECK(none.format() == pthload::Format::kSafetensors);
    const auto bin_index = fs::path(PTHLOAD_FIXTURES_DIR) / "shards" / "bin";
    CHECK(open_with(io, bin_index, {.filter = {.only = {"nothing"}}}).format() ==
          pthload::Format::kZip);
    CHECK(pthload::internal::Access::state(
              open_with(io, bin_index, {.filter = {.only = {"lm_head.weight"}}}))
              .shards.size() == 1);
    CHECK(open_with(io, folder,
                    {.filter = {.rename_prefix = {{"layers.", "model.layers."}},
                                .only = {"model.layers.0.bias"}}})
              .tensors()
              .size() == 1);
    CHECK(error_code_of([&] {
            (void)open_with(io, folder, {.filter = {.only = {"embed.weight"}}});
          }) == Errc::kIoOpenFailed);
    CHECK(error_code_of([&] { (void)open_with(io, folder, {.filter = {.select = "model"}}); }) ==
          Errc::kSelectNotFound);
    // All of it, from the fixture itself: every shard opened.
    CHECK(pthload::internal::Access::state(open_with(io, kPartialFixtures / "sharded"))
              .shards.size() == 3);
  }
}
