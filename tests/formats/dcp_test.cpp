// torch.distributed.checkpoint directories as a Checkpoint: fixtures dcp.save wrote
// (tests/fixtures/make_dcp_fixtures.py), opened and loaded under both I/O strategies and checked
// against torch's own dcp.load; partial loads; hostile .metadata and items. The .metadata parser
// alone: tests/dcp/metadata_test.cpp.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "formats/formats_test_support.hpp"
#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/dcp_metadata.hpp"
#include "support/error_code.hpp"
#include "support/files.hpp"
#include "support/pickle_writer.hpp"

namespace {

namespace fs = std::filesystem;
using pthload::Errc;
using pthload::IoStrategy;
using pthload::test::error_code_of;
using pthload::test::error_thrown;
using pthload::test::io_name;
using pthload::test::maps_file;
using pthload::test::PickleWriter;
using pthload::test::TempPath;
using pthload::test::dcp_build::ChunkSpec;
using pthload::test::dcp_build::metadata_pickle;

const fs::path kFixtures = fs::path(PTHLOAD_FIXTURES_DIR) / "dcp";

struct Expected {
  std::string dtype;
  std::string shape;
  std::string xxh3;
};

// MANIFEST.txt: "tensor DIR NAME DTYPE SHAPE XXH3" and "bytes DIR NAME" lines, from torch.
struct Manifest {
  std::map<std::string, std::map<std::string, Expected>> tensors;  // by directory, then name
  std::map<std::string, std::set<std::string>> bytes_items;
};

Manifest read_manifest() {
  Manifest manifest;
  std::ifstream in(kFixtures / "MANIFEST.txt");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, dir, name;
    words >> kind >> dir >> name;
    if (kind == "tensor") {
      Expected e;
      words >> e.dtype >> e.shape >> e.xxh3;
      manifest.tensors[dir][name] = e;
    } else if (kind == "bytes") {
      manifest.bytes_items[dir].insert(name);
    }
  }
  return manifest;
}

std::string shape_of(const pthload::Tensor& tensor) {
  if (tensor.sizes().empty()) return "scalar";
  return fmt::format("{}", fmt::join(tensor.sizes(), "x"));
}

}  // namespace

TEST_SUITE("fixtures") {
  TEST_CASE("formats dcp: open and load give what torch's dcp.load gives, mapped and read") {
    const auto manifest = read_manifest();
    REQUIRE(manifest.tensors.size() == 2);
    for (const IoStrategy io : {IoStrategy::kMap, IoStrategy::kRead}) {
      for (const auto& [dir, expected] : manifest.tensors) {
        CAPTURE(dir);
        CAPTURE(io_name(io));
        const auto opened = pthload::open(kFixtures / dir, {.io = io});
        CHECK(opened.format() == pthload::Format::kDcp);
        // The .metadata file stands for its directory.
        CHECK(pthload::open(kFixtures / dir / ".metadata", {.io = io}).tensors().size() ==
              opened.tensors().size());
        CHECK(pthload::format_name(opened.format()) == "dcp");
        const auto loaded = pthload::load(kFixtures / dir, {.io = io});
        CHECK(opened.tensors().size() == loaded.tensors().size());
        for (const auto* checkpoint : {&loaded}) {
          std::map<std::string, Expected> got;
          for (const auto& named : checkpoint->tensors()) {
            got[named.name] = {std::string(pthload::dtype_name(named.tensor.dtype())),
                               shape_of(named.tensor),
                               fmt::format("{:016x}", named.tensor.content_checksum())};
          }
          REQUIRE(got.size() == expected.size());
          for (const auto& [name, e] : expected) {
            CAPTURE(name);
            REQUIRE(got.contains(name));
            CHECK(got[name].dtype == e.dtype);
            CHECK(got[name].shape == e.shape);
            CHECK(got[name].xxh3 == e.xxh3);
          }
          std::set<std::string> opaque;
          for (const auto& value : checkpoint->opaque_values())
            opaque.insert(value.name);
          CHECK(opaque == manifest.bytes_items.at(dir));
        }
        // Every storage placed: a view of a .distcp file when mapped (one chunk), owned when
        // read (never a view of anything mapped).
        for (const auto& storage : loaded.storages()) {
          const auto& state = pthload::internal::Access::state(*storage);
          const bool view = std::holds_alternative<pthload::internal::FileView>(state.placement);
          const auto& file = state.file_range->file;
          REQUIRE(file);
          // An assembled tensor's buffer is owned memory: a view of it maps nothing.
          if (io == IoStrategy::kRead) CHECK_FALSE(maps_file(*file));
          if (view) CHECK_FALSE(file->has_holes());
        }
      }
    }
  }

  TEST_CASE(
      "formats dcp: a tensor saved in one chunk is a view of its .distcp file where aligned") {
    const auto loaded = pthload::load(kFixtures / "single");
    // A transposed tensor keeps the item's own strides, as torch.save kept them.
    CHECK(loaded.tensor("model.layers.1.weight_t").strides()[0] == 1);
    // Items follow one another unpadded, so a storage is a view only where its address happens
    // to suit its dtype (bool: always), else an aligned copy (cpu/placement.cpp).
    std::size_t views = 0;
    for (const auto& named : loaded.tensors()) {
      const auto& state = pthload::internal::Access::state(named.tensor.storage());
      CAPTURE(named.name);
      CHECK(maps_file(*state.file_range->file));
      const bool view = std::holds_alternative<pthload::internal::FileView>(state.placement);
      const std::byte* source = state.file_range->file->bytes().data() + state.file_range->offset;
      const bool aligned = reinterpret_cast<std::uintptr_t>(source) %
                               std::min<std::size_t>(pthload::element_size(state.dtype), 16) ==
                           0;
      if (view) ++views;
      CHECK(view == aligned);
      if (view) CHECK(state.cpu_bytes.data() == source);
    }
    CHECK(std::holds_alternative<pthload::internal::FileView>(
        pthload::internal::Access::state(loaded.tensor("model.mask").storage()).placement));
    CHECK(views >= 1);
  }

  TEST_CASE("formats dcp: a sharded tensor is assembled from the chunks of both ranks' files") {
    const auto opened = pthload::open(kFixtures / "sharded");
    const auto& rows = opened.tensor("model.rows");  // Shard(0): rows 0-2 and 3-5
    const auto& cols = opened.tensor("model.cols");  // Shard(1): columns 0-2 and 3-5
    const auto row_data = pthload::load(kFixtures / "sharded").tensor("model.rows");
    const auto* floats = reinterpret_cast<const float*>(row_data.data());
    for (int i = 0; i < 24; ++i)
      CHECK(floats[i] == static_cast<float>(i) / 8);
    CHECK(rows.strides()[0] == 4);
    const auto col_data = pthload::load(kFixtures / "sharded").tensor("model.cols");
    const auto* shorts = reinterpret_cast<const std::int16_t*>(col_data.data());
    for (int i = 0; i < 30; ++i)
      CHECK(shorts[i] == i - 7);
    CHECK(cols.sizes()[1] == 6);
  }

  TEST_CASE("formats dcp: partial loads open only the files of the chosen tensors") {
    for (const IoStrategy io : {IoStrategy::kMap, IoStrategy::kRead}) {
      CAPTURE(io_name(io));
      const auto dir = TempPath::copy_of(kFixtures / "sharded");
      fs::remove(dir.path() / "__0_0.distcp");  // rank 0's: half of rows and cols
      const auto plain = pthload::load(dir.path(), {.filter = {.only = {"model.plain"}}, .io = io});
      REQUIRE(plain.tensors().size() == 1);
      CHECK(plain.storages().size() == 1);
      CHECK(fmt::format("{:016x}", plain.tensors()[0].tensor.content_checksum()) ==
            read_manifest().tensors["sharded"]["model.plain"].xxh3);
      CHECK(error_code_of([&] { (void)pthload::open(dir.path(), {.io = io}); }) ==
            Errc::kIoOpenFailed);
    }
    const auto model = pthload::open(kFixtures / "single",
                                     {.filter = {.select = "model", .exclude = {"layers.*"}}});
    std::set<std::string> names;
    for (const auto& named : model.tensors())
      names.insert(named.name);
    CHECK(names == std::set<std::string>{"embed.weight", "head.weight", "mask", "index"});
    CHECK(model.opaque_values().empty());
    CHECK(error_code_of([&] {
            (void)pthload::open(kFixtures / "single", {.filter = {.select = "ema"}});
          }) == Errc::kSelectNotFound);
    CHECK(error_code_of([&] {
            (void)pthload::open(
                kFixtures / "single",
                {.filter = {.rename_prefix = {{"model.embed.", "x."}, {"model.head.", "x."}}}});
          }) == Errc::kSelectNameCollision);
  }

  TEST_CASE("formats dcp: items written as safetensors are refused with the reason") {
    for (const IoStrategy io : {IoStrategy::kMap, IoStrategy::kRead}) {
      const auto e = error_thrown<pthload::UnsupportedError>(
          [&] { (void)pthload::open(kFixtures / "safetensors_format", {.io = io}); });
      CHECK(e.code() == Errc::kDcpItemMismatch);
      CHECK(std::string(e.what()).find("SAFETENSORS") != std::string::npos);
    }
  }

  TEST_CASE("formats dcp: hostile directories give errors, never crashes") {
    const std::string metadata = [] {
      std::ifstream in(kFixtures / "sharded" / ".metadata", std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    }();
    REQUIRE(metadata.size() > 100);
    SUBCASE("an item path that leaves the directory") {
      const auto dir = TempPath::copy_of(kFixtures / "sharded");
      auto bytes = metadata;
      const auto at = bytes.find("__1_0.distcp");
      REQUIRE(at != std::string::npos);
      bytes[at] = '/';
      dir.write(".metadata", bytes);
      CHECK(error_code_of([&] { (void)pthload::open(dir.path()); }) == Errc::kShardNameUnsafe);
    }
    SUBCASE("a .distcp file shorter than its items") {
      const auto dir = TempPath::copy_of(kFixtures / "sharded");
      dir.write("__1_0.distcp", dir.read("__1_0.distcp").substr(0, 2000));
      const auto e = error_thrown<pthload::FormatError>([&] { (void)pthload::open(dir.path()); });
      CHECK(e.code() == Errc::kDcpItemOutOfBounds);
      CHECK(e.context().path == (dir.path() / "__1_0.distcp").string());
      CHECK(e.context().offset.has_value());
    }
    SUBCASE("an item that is not the tensor the metadata describes") {
      const auto dir = TempPath::copy_of(kFixtures / "sharded");
      auto bytes = metadata;
      // model.cols is int16: call it int32, whose items torch would have written differently.
      const auto at = bytes.find("int16");
      REQUIRE(at != std::string::npos);
      bytes.replace(at, 5, "int32");
      dir.write(".metadata", bytes);
      CHECK(error_code_of([&] { (void)pthload::open(dir.path()); }) == Errc::kDcpItemMismatch);
    }
    SUBCASE("every truncation and every byte changed of .metadata") {
      const auto dir = TempPath::copy_of(kFixtures / "sharded");
      std::size_t errors = 0;
      const auto attempt = [&](const std::string& bytes) {
        dir.write(".metadata", bytes);
        try {
          (void)pthload::load(dir.path());
        } catch (const pthload::Error&) {
          ++errors;
        }
      };
      for (std::size_t n = 0; n < metadata.size(); n += 7)
        attempt(metadata.substr(0, n));
      for (std::size_t i = 0; i < metadata.size(); i += 3) {
        for (const unsigned char value : {0x00u, 0x7fu, 0xffu}) {
          auto bytes = metadata;
          bytes[i] = static_cast<char>(value);
          attempt(bytes);
        }
      }
      CHECK(errors > metadata.size() / 7);  // every truncation at least fails
    }
  }
}

namespace {

// One .distcp item: a torch.save stream of one float32 tensor of `sizes` and `strides` over a
// storage of `numel` elements.
std::string float_item(std::initializer_list<std::int64_t> sizes,
                       std::initializer_list<std::int64_t> strides, int numel) {
  PickleWriter p;
  p.tensor_v2("FloatStorage", "0", numel, 0, sizes, strides).stop();
  const auto built = pthload::test::checkpoint_archive(
      p.bytes(), {{.name = "item/data/0", .data = pthload::test::float_record(numel)}}, "item");
  return pthload::test::text_of(built.bytes);
}

// A DCP directory of one float32 tensor "w" of `sizes`, whose chunks' items are `items`, back to
// back in __0_0.distcp.
struct HandMadeDcp {
  TempPath dir = TempPath::folder();
  HandMadeDcp(const std::vector<std::int64_t>& sizes, std::vector<ChunkSpec> chunks,
              const std::vector<std::string>& items) {
    std::string distcp;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      chunks[i].offset = static_cast<std::int64_t>(distcp.size());
      chunks[i].length = static_cast<std::int64_t>(items[i].size());
      distcp += items[i];
    }
    dir.write(".metadata", metadata_pickle(sizes, chunks));
    dir.write("__0_0.distcp", distcp);
  }
};

}  // namespace

TEST_CASE("formats dcp: an assembled tensor's items must hold the bytes of their chunks") {
  const std::vector<ChunkSpec> halves{{.offsets = {0, 0}, .sizes = {2, 4}},
                                      {.offsets = {2, 0}, .sizes = {2, 4}}};
  SUBCASE("whole items assemble") {
    const HandMadeDcp dcp({4, 4}, halves,
                          {float_item({2, 4}, {4, 1}, 8), float_item({2, 4}, {4, 1}, 8)});
    const auto checkpoint = pthload::load(dcp.dir.path());
    REQUIRE(checkpoint.tensors().size() == 1);
    const auto bytes = checkpoint.tensors()[0].tensor.contiguous_bytes();
    CHECK(bytes.size() == 64);
  }
  SUBCASE("an expanded item (stride 0), which would let a few bytes fill the whole tensor") {
    const HandMadeDcp dcp({4, 4}, halves,
                          {float_item({2, 4}, {4, 1}, 8), float_item({2, 4}, {0, 1}, 4)});
    for (const auto io : {IoStrategy::kMap, IoStrategy::kRead}) {
      CAPTURE(io_name(io));
      CHECK(error_code_of([&] { (void)pthload::open(dcp.dir.path(), {.io = io}); }) ==
            Errc::kDcpItemMismatch);
    }
  }
  SUBCASE("a .distcp file that is no regular file is refused before it is opened") {
    const HandMadeDcp dcp({4, 4}, halves,
                          {float_item({2, 4}, {4, 1}, 8), float_item({2, 4}, {4, 1}, 8)});
    fs::remove(dcp.dir.path() / "__0_0.distcp");
    fs::create_symlink("/dev/null", dcp.dir.path() / "__0_0.distcp");
    for (const auto io : {IoStrategy::kMap, IoStrategy::kRead}) {
      CAPTURE(io_name(io));
      CHECK(error_code_of([&] { (void)pthload::open(dcp.dir.path(), {.io = io}); }) ==
            Errc::kIoOpenFailed);
    }
  }
}
