// Every fixture pthload reads, saved and read back: the same names, dtypes, shapes, strides,
// offsets and contents (read → save → read), and with compact_views the same names and
// contents over contiguous storages of exactly their elements.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/error.hpp"
#include "pthload/records.hpp"
#include "pthload/save.hpp"
#include "support/files.hpp"
#include "writer/saved_bytes.hpp"

namespace pthload::test {
namespace {

// The checkpoints to round-trip: every torch fixture that loads on the CPU, the safetensors
// files, a set of shards of each kind and the DCP directories.
std::vector<std::filesystem::path> sources() {
  std::vector<std::filesystem::path> paths = fixture_files("torch", has_extension(".pt"));
  for (const auto& path : fixture_files("safetensors", has_extension(".safetensors")))
    paths.push_back(path);
  for (const char* relative : {"shards/bin", "shards/safetensors", "dcp/single", "dcp/sharded",
                               "dcp/safetensors_format", "mlp"}) {
    if (std::filesystem::exists(fixture_path(relative))) paths.push_back(fixture_path(relative));
  }
  return paths;
}

bool is_contiguous_from_zero(const Tensor& t) {
  return t.storage_offset() == 0 && t.is_contiguous();
}

void check_same(const NamedTensor& a, const NamedTensor& b, bool compact) {
  CAPTURE(std::string(a.name));
  CHECK(std::string_view(a.name) == std::string_view(b.name));
  CHECK(a.tensor.dtype() == b.tensor.dtype());
  CHECK(std::vector(a.tensor.sizes().begin(), a.tensor.sizes().end()) ==
        std::vector(b.tensor.sizes().begin(), b.tensor.sizes().end()));
  if (compact) {
    CHECK(is_contiguous_from_zero(b.tensor));
    CHECK(b.tensor.storage().nbytes() == b.tensor.nbytes());
  } else {
    CHECK(std::vector(a.tensor.strides().begin(), a.tensor.strides().end()) ==
          std::vector(b.tensor.strides().begin(), b.tensor.strides().end()));
    CHECK(a.tensor.storage_offset() == b.tensor.storage_offset());
    CHECK(a.tensor.storage().nbytes() == b.tensor.storage().nbytes());
  }
  CHECK(a.tensor.requires_grad() == b.tensor.requires_grad());
  CHECK(a.tensor.content_checksum() == b.tensor.content_checksum());
}

TEST_SUITE("fixtures") {
  TEST_CASE("every fixture round-trips: read, save, read gives the same tensors") {
    int files = 0;
    int tensors = 0;
    for (const auto& path : sources()) {
      CAPTURE(path);
      std::optional<Checkpoint> source;
      try {
        source.emplace(load(path, {.map_location = map_to("cpu")}));
      } catch (const Error&) {
        continue;  // the hostile fixtures: nothing to save
      }
      for (const bool compact : {false, true}) {
        CAPTURE(compact);
        SaveOptions options{.compact_views = compact, .skip_unsupported = true};
        SaveReport report;
        std::vector<std::byte> bytes;
        const SaveSink sink = [&](std::span<const std::byte> chunk) {
          bytes.insert(bytes.end(), chunk.begin(), chunk.end());
        };
        report = save(sink, *source, options);
        CHECK(report.bytes == bytes.size());
        const Checkpoint copy = reload(bytes);
        CHECK(copy.format() == Format::kZip);
        // What was left out is what save() cannot write; the rest comes back in order.
        std::vector<const NamedTensor*> kept;
        for (const NamedTensor& named : source->tensors()) {
          const bool skipped = std::any_of(
              report.skipped.begin(), report.skipped.end(),
              [&](const std::string& s) { return s.starts_with(std::string(named.name) + " ("); });
          if (!skipped) kept.push_back(&named);
        }
        REQUIRE(copy.tensors().size() == kept.size());
        CHECK(report.tensors == kept.size());
        for (std::size_t i = 0; i < kept.size(); ++i)
          check_same(*kept[i], copy.tensors()[i], compact);
        tensors += static_cast<int>(kept.size());
        // The archive is sound for any zip reader: every record's CRC-32 checks.
        CHECK(RecordReader::open(std::span<const std::byte>(bytes)).verify_all().empty());
      }
      ++files;
    }
    MESSAGE(files << " fixtures, " << tensors << " tensors round-tripped");
    CHECK(files >= 60);
  }
}

}  // namespace
}  // namespace pthload::test
