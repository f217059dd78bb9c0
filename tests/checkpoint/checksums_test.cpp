// content_checksums(): the same values and errors as Tensor::content_checksum() asked of each
// tensor in turn, whatever the placement, the order asked and the tensors' shapes.
#include <doctest/doctest.h>
#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "support/checkpoint_file.hpp"
#include "support/cpu_loads.hpp"
#include "support/error_code.hpp"
#include "support/pickle_writer.hpp"

namespace {

using pthload::test::error_thrown;
using pthload::test::PickleWriter;

std::vector<const pthload::Tensor*> with_storages(const pthload::Checkpoint& checkpoint) {
  std::vector<const pthload::Tensor*> tensors;
  for (const auto& named : checkpoint.tensors())
    if (named.tensor.has_storage()) tensors.push_back(&named.tensor);
  return tensors;
}

std::vector<std::uint64_t> one_at_a_time(std::span<const pthload::Tensor* const> tensors) {
  std::vector<std::uint64_t> checksums;
  for (const pthload::Tensor* tensor : tensors)
    checksums.push_back(tensor->content_checksum());
  return checksums;
}

// 2 000 small views over 500 storages of 8 floats (two elements at offsets 0-3, so tensors share
// storages and start inside them), a strided view, an empty tensor, and one storage of 80 000
// floats (320 KB: read on its own, past what one window batches).
pthload::test::zip_build::Built mixed_archive() {
  PickleWriter p;
  p.empty_dict();
  for (int i = 0; i < 2000; ++i) {
    p.str("t" + std::to_string(i));
    p.tensor_v2("FloatStorage", std::to_string(i % 500), 8, i % 4, {2}, {1});
    p.setitem();
  }
  p.str("strided").tensor_v2("FloatStorage", "7", 8, 1, {3}, {2}).setitem();
  p.str("empty").tensor_v2("FloatStorage", "8", 8, 0, {0}, {1}).setitem();
  p.str("large").tensor_v2("FloatStorage", "500", 80'000, 0, {80'000}, {1}).setitem();
  // Record `key` holds key * 1000 + 0, 1, 2...: every float distinct across the file.
  std::vector<pthload::test::zip_build::Record> records;
  for (int key = 0; key < 500; ++key)
    records.push_back({.name = "ck/data/" + std::to_string(key),
                       .data = pthload::test::float_record(8, static_cast<float>(key * 1000))});
  records.push_back({.name = "ck/data/500", .data = pthload::test::float_record(80'000, 500'000)});
  return pthload::test::checkpoint_archive(p.stop().bytes(), records);
}

pthload::test::TempPath mixed_checkpoint() {
  return pthload::test::TempPath(mixed_archive().bytes);
}

}  // namespace

TEST_CASE("checkpoint checksums: many small tensors hash as each asked alone, in the order asked") {
  const auto file = mixed_checkpoint();
  for (const auto& placement : pthload::test::kCpuPlacements) {
    CAPTURE(placement.what);
    const auto checkpoint = pthload::load(file.path(), placement.options);
    auto tensors = with_storages(checkpoint);
    REQUIRE(tensors.size() == 2003);
    CHECK(pthload::content_checksums(tensors) == one_at_a_time(tensors));
    // Out of file order: the values still come in the order asked.
    std::reverse(tensors.begin(), tensors.end());
    CHECK(pthload::content_checksums(tensors) == one_at_a_time(tensors));
    // The same storage asked twice, and a single tensor.
    tensors.push_back(tensors.front());
    CHECK(pthload::content_checksums(tensors) == one_at_a_time(tensors));
    CHECK(pthload::content_checksums(std::span(tensors).first(1)) ==
          one_at_a_time(std::span(tensors).first(1)));
  }
  CHECK(pthload::content_checksums({}).empty());
}

TEST_CASE("checkpoint checksums: large views read through one window hash the bytes they show") {
  // Too large to batch, each read through the window content_checksums() keeps from one tensor
  // to the next: 3 MiB and 12 bytes (three whole 1 MiB chunks and a short one), then smaller
  // (300 KB), larger than a chunk again (1.5 MiB), and a view starting 1 000 floats into the
  // first storage. The expected values are libxxhash's XXH3 of the records' bytes.
  const int counts[] = {786'435, 75'000, 393'216};
  PickleWriter p;
  p.empty_dict();
  std::vector<pthload::test::zip_build::Record> records;
  std::vector<std::uint64_t> expected;
  for (int i = 0; i < 3; ++i) {
    p.str("t" + std::to_string(i));
    p.tensor_v2("FloatStorage", std::to_string(i), counts[i], 0, {counts[i]}, {1});
    p.setitem();
    records.push_back({.name = "ck/data/" + std::to_string(i),
                       .data = pthload::test::float_record(counts[i], i * 1'000'000.0f)});
    expected.push_back(XXH3_64bits(records.back().data.data(), records.back().data.size()));
  }
  p.str("view").tensor_v2("FloatStorage", "0", counts[0], 1'000, {500'000}, {1}).setitem();
  expected.push_back(XXH3_64bits(records[0].data.data() + 4'000, 2'000'000));
  const auto file = pthload::test::checkpoint_file(p.stop().bytes(), records);
  for (const bool copies : {false, true}) {
    CAPTURE(copies);
    const auto checkpoint = pthload::load(file.path(), {.copy_cpu_storages = copies});
    const auto tensors = with_storages(checkpoint);
    REQUIRE(tensors.size() == 4);
    CHECK(pthload::content_checksums(tensors) == expected);
    CHECK(one_at_a_time(tensors) == expected);
  }
}

TEST_CASE(
    "checkpoint checksums: a file shrunk after a view load fails as the first tensor asked does") {
  const auto archive = mixed_archive();
  const pthload::test::TempPath file(archive.bytes);
  const auto checkpoint = pthload::load(file.path());
  const auto tensors = with_storages(checkpoint);
  // Cut inside the small storages' records, in the middle of record 250: the tensors of the
  // storages before it still read, and t250 is the first whose read fails when each is asked
  // in turn, though the batch's one read of all 500 records fails as a whole.
  const std::uint64_t cut = archive.at("ck/data/250").data + 4;
  REQUIRE(cut < archive.bytes.size());
  std::filesystem::resize_file(file.path(), cut);
  const auto alone = error_thrown<pthload::IoError>([&] { (void)one_at_a_time(tensors); });
  CHECK(alone.code() == pthload::Errc::kIoUnexpectedEof);
  const std::string expected = alone.what();
  CHECK(expected.find("ck/data/250") != std::string::npos);
  const auto together =
      error_thrown<pthload::IoError>([&] { (void)pthload::content_checksums(tensors); });
  CHECK(together.code() == pthload::Errc::kIoUnexpectedEof);
  CHECK(std::string(together.what()) == expected);
}

TEST_SUITE("fixtures") {
  TEST_CASE("checkpoint checksums: every fixture's tensors hash as each asked alone") {
    const int files = pthload::test::for_each_torch_fixture(
        [](const std::filesystem::path& path, const pthload::Checkpoint& checkpoint) {
          CAPTURE(path.string());
          const auto tensors = with_storages(checkpoint);
          std::string alone;
          std::vector<std::uint64_t> expected;
          try {
            expected = one_at_a_time(tensors);
          } catch (const pthload::Error& e) {
            alone = e.what();
          }
          std::string together;
          std::vector<std::uint64_t> checksums;
          try {
            checksums = pthload::content_checksums(tensors);
          } catch (const pthload::Error& e) {
            together = e.what();
          }
          CHECK(together == alone);
          CHECK(checksums == expected);
        });
    CHECK(files > 50);
  }
}
