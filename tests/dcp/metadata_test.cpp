// lib/dcp: torch.distributed.checkpoint's .metadata built by hand (support/dcp_metadata.hpp)
// parses, and each malformed field is refused. Directories dcp.save wrote, opened as a
// Checkpoint: tests/formats/dcp_test.cpp.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dcp/metadata.hpp"
#include "pthload/error.hpp"
#include "support/dcp_metadata.hpp"
#include "support/error_code.hpp"

namespace {

using pthload::Errc;
using pthload::test::error_code_of;
using pthload::test::dcp_build::ChunkSpec;
using pthload::test::dcp_build::metadata_pickle;

Errc parse_code(const std::string& bytes) {
  return error_code_of([&] {
    (void)pthload::dcp::parse_metadata(std::as_bytes(std::span(bytes.data(), bytes.size())), {});
  });
}

}  // namespace

TEST_CASE("dcp: metadata built by hand parses, and each malformed field is refused") {
  const std::vector<ChunkSpec> halves{{.offsets = {0, 0}, .sizes = {2, 4}},
                                      {.offsets = {2, 0}, .sizes = {2, 4}, .offset = 100}};
  const auto good = metadata_pickle({4, 4}, halves);
  const auto parsed =
      pthload::dcp::parse_metadata(std::as_bytes(std::span(good.data(), good.size())), {});
  REQUIRE(parsed.entries.size() == 1);
  CHECK(parsed.entries[0].fqn == "w");
  CHECK(parsed.entries[0].dtype_name == "float32");
  CHECK(parsed.entries[0].chunks.size() == 2);
  CHECK(parsed.entries[0].chunks[1].location.offset == 100);
  CHECK(parsed.version == "1.0.0");

  CHECK(parse_code(metadata_pickle({4, 4}, halves, "Other")) == Errc::kDcpBadMetadata);
  CHECK(parse_code(metadata_pickle({4, 4}, {halves[0]})) == Errc::kDcpBadChunks);  // a gap
  CHECK(parse_code(metadata_pickle({4, 4}, {halves[0], halves[0]})) ==
        Errc::kDcpBadMetadata);  // one storage_data key twice
  CHECK(parse_code(metadata_pickle(
            {4, 4}, {halves[0], {.offsets = {1, 0}, .sizes = {3, 4}, .offset = 100}})) ==
        Errc::kDcpBadChunks);  // overlap
  CHECK(parse_code(metadata_pickle(
            {4, 4}, {halves[0], {.offsets = {2, 0}, .sizes = {3, 4}, .offset = 100}})) ==
        Errc::kDcpBadChunks);  // past the end
  CHECK(parse_code(
            metadata_pickle({4, 4}, {halves[0], {.offsets = {2}, .sizes = {2}, .offset = 100}})) ==
        Errc::kDcpBadChunks);  // dimensions
  CHECK(parse_code(metadata_pickle({4, -4}, halves)) == Errc::kDcpBadMetadata);
  auto unlisted = halves;
  unlisted[1].listed = false;
  CHECK(parse_code(metadata_pickle({4, 4}, unlisted)) == Errc::kDcpBadMetadata);
  auto escaping = halves;
  escaping[1].path = "..";
  CHECK(parse_code(metadata_pickle({4, 4}, escaping)) == Errc::kShardNameUnsafe);
  escaping[1].path = "../x.distcp";
  CHECK(parse_code(metadata_pickle({4, 4}, escaping)) == Errc::kShardNameUnsafe);
  auto negative = halves;
  negative[1].offset = -1;
  CHECK(parse_code(metadata_pickle({4, 4}, negative)) == Errc::kDcpBadMetadata);
  // Two chunks whose items share bytes: one item could fill any number of chunks.
  auto shared = halves;
  shared[1].offset = 50;
  CHECK(parse_code(metadata_pickle({4, 4}, shared)) == Errc::kDcpBadMetadata);
  shared[1].offset = 0;
  CHECK(parse_code(metadata_pickle({4, 4}, shared)) == Errc::kDcpBadMetadata);
  shared[1].path = "__1_0.distcp";  // the same offset of another file
  CHECK(parse_code(metadata_pickle({4, 4}, shared)) == Errc::kOk);
  auto compressed = halves;
  compressed[1].transform = true;
  CHECK(parse_code(metadata_pickle({4, 4}, compressed)) == Errc::kDcpTransformUnsupported);
  const std::int64_t big = std::int64_t{1} << 40;
  CHECK(parse_code(metadata_pickle({big, big}, {{.offsets = {0, 0}, .sizes = {big, big}}})) ==
        Errc::kDcpBadMetadata);  // 2^80 elements
  // No element, but assembling strides of 2^80 and 2^40, which an int64 does not hold.
  CHECK(parse_code(metadata_pickle({0, big, big}, {{.offsets = {0, 0, 0}, .sizes = {0, 1, 1}}})) ==
        Errc::kDcpBadMetadata);
  CHECK(parse_code(metadata_pickle({0, big, 8}, {{.offsets = {0, 0, 0}, .sizes = {0, 1, 1}}})) ==
        Errc::kOk);
  // Overlapping chunks whose element counts sum past 2^64 before the overlap is found.
  const std::int64_t quarter = std::int64_t{1} << 62;
  std::vector<ChunkSpec> piled;
  for (std::int64_t i = 0; i < 5; ++i)
    piled.push_back({.offsets = {i}, .sizes = {quarter - i}, .offset = 100 * i});
  CHECK(parse_code(metadata_pickle({quarter}, piled)) == Errc::kDcpBadChunks);
}
