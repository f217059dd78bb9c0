// Storages and the tensors over them, in the zip and the legacy formats: views that claim more
// than their storage holds (size, stride, offset, negative strides, size*stride overflow), views
// that overlap themselves to show 2^40 elements,
// storages whose element counts are 2^63, 2^64-1 and 2^32-1, and TorchScript constants that
// name records the archive does not have.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "formats/hostile_cases.hpp"
#include "pthload/checkpoint.hpp"
#include "support/bytes.hpp"
#include "support/checkpoint_file.hpp"
#include "support/error_code.hpp"
#include "support/legacy_builder.hpp"
#include "support/pickle_writer.hpp"

using pthload::Errc;
using pthload::test::error_code_of;
using pthload::test::float_record;
using pthload::test::PickleWriter;
using namespace pthload::test::hostile;
namespace lb = pthload::test::legacy_build;

namespace {

constexpr std::int64_t k2to62 = std::int64_t{1} << 62;
constexpr std::int64_t kInt64Max = INT64_MAX;

/// A tensor's geometry over an 8-element float32 storage '0'.
struct Geometry {
  const char* name;
  std::int64_t offset;
  std::initializer_list<std::int64_t> sizes;
  std::initializer_list<std::int64_t> strides;
  Errc expected;  ///< the same in both formats
};

// Each claims elements the 8-element storage does not hold, or cannot be computed in 64 bits.
const Geometry kBadGeometries[] = {
    {"one element past the end", 0, {9}, {1}, Errc::kTorchTensorOutOfBounds},
    {"offset past the end", 8, {1}, {1}, Errc::kTorchTensorOutOfBounds},
    {"offset 2^62", k2to62, {1}, {1}, Errc::kTorchTensorOutOfBounds},
    {"offset INT64_MAX", kInt64Max, {1}, {1}, Errc::kTorchTensorOutOfBounds},
    {"stride past the end", 0, {2, 2}, {8, 1}, Errc::kTorchTensorOutOfBounds},
    {"negative stride", 4, {4}, {-1}, Errc::kTorchBadRebuildArguments},
    {"negative stride reaching below zero", 0, {2}, {-1}, Errc::kTorchBadRebuildArguments},
    {"negative offset", -1, {1}, {1}, Errc::kTorchBadRebuildArguments},
    {"negative size", 0, {-1}, {1}, Errc::kTorchBadRebuildArguments},
    {"size*stride overflows int64", 0, {2, 2}, {kInt64Max, 1}, Errc::kTorchTensorOutOfBounds},
    {"size*stride overflows uint64", 0, {k2to62, 5}, {4, 1}, Errc::kTorchBadRebuildArguments},
    {"sizes whose product overflows",
     0,
     {k2to62, k2to62, 0 + 4},
     {0, 0, 1},
     Errc::kTorchBadRebuildArguments},
    {"INT64_MAX size, zero stride", 0, {kInt64Max}, {0}, Errc::kTorchBadRebuildArguments},
};

std::vector<std::byte> zip_checkpoint(const std::string& pickle, int storage_floats = 8) {
  return pthload::test::checkpoint_archive(
             pickle, {{.name = "ck/data/0", .data = float_record(storage_floats)}})
      .bytes;
}

// {'a': a valid view of all 8 elements, 'b': the hostile geometry over the same storage}
std::string shared_storage_pickle(const Geometry& g, std::int64_t numel = 8) {
  PickleWriter p;
  p.empty_dict().mark().str("a").tensor_v2("FloatStorage", "0", numel, 0, {8}, {1});
  p.str("b").tensor_v2("FloatStorage", "0", numel, g.offset, g.sizes, g.strides);
  return p.setitems().stop().bytes();
}

std::string legacy_header() {
  return lb::magic() + lb::protocol() + lb::sys_info();
}

std::vector<std::byte> legacy_checkpoint(const std::string& main, std::uint64_t count,
                                         int floats = 8) {
  return pthload::test::bytes_of(legacy_header() + main + lb::key_list({"100"}) + lb::count(count) +
                                 lb::floats(floats));
}

std::string legacy_shared_pickle(const Geometry& g, std::int64_t numel = 8) {
  PickleWriter p;
  p.empty_dict().mark().str("a");
  lb::tensor(p, "FloatStorage", "100", numel, 0, {8}, {1});
  p.str("b");
  lb::tensor(p, "FloatStorage", "100", numel, g.offset, g.sizes, g.strides);
  return p.setitems().stop().bytes();
}

const std::pair<const char*, std::uint64_t> kHugeCounts[] = {
    {"2^63", std::uint64_t{1} << 63},
    {"2^64-1", ~std::uint64_t{0}},
    {"2^32-1", 0xFFFF'FFFF},
    {"2^32", std::uint64_t{1} << 32},
    {"2^62 (2^64 bytes of float32)", std::uint64_t{1} << 62}};

// Past this, a legacy storage's float32 byte count overflows 64 bits before it is compared with
// the table's count.
constexpr std::uint64_t kFloatsIn64Bits = (std::uint64_t{1} << 62) - 1;

}  // namespace

TEST_SUITE_BEGIN("hostile");

TEST_CASE("formats hostile: the unmodified storages load") {
  const Geometry fine{"fine", 2, {3, 2}, {1, 3}, Errc::kOk};
  run_cases({{"zip", zip_checkpoint(shared_storage_pickle(fine)), code(Errc::kOk)},
             {"legacy", legacy_checkpoint(legacy_shared_pickle(fine), 8), code(Errc::kOk)}});
}

TEST_CASE("formats hostile: views that claim more than their shared storage holds (zip)") {
  std::vector<Case> cases;
  for (const auto& g : kBadGeometries)
    cases.push_back({std::string("zip: ") + g.name, zip_checkpoint(shared_storage_pickle(g)),
                     code(g.expected)});
  run_cases(cases);
}

TEST_CASE("formats hostile: views that claim more than their shared storage holds (legacy)") {
  std::vector<Case> cases;
  for (const auto& g : kBadGeometries)
    cases.push_back({std::string("legacy: ") + g.name,
                     legacy_checkpoint(legacy_shared_pickle(g), 8), code(g.expected)});
  run_cases(cases);
}

TEST_CASE("formats hostile: stride-0 views showing 2^40 elements of an 8-element storage") {
  // Legal geometry (expand makes it), so open() accepts it; reading every element is what a
  // checksum would do, and is refused past Limits::max_overlapping_view_bytes instead of hanging.
  const Geometry expanded{"expanded", 0, {INT64_C(1) << 20, INT64_C(1) << 20}, {0, 0}, Errc::kOk};
  run_cases(
      {{"zip: stride-0 view of 2^40 elements", zip_checkpoint(shared_storage_pickle(expanded)),
        code(Errc::kTorchLimitExceeded)},
       {"legacy: stride-0 view of 2^40 elements",
        legacy_checkpoint(legacy_shared_pickle(expanded), 8), code(Errc::kTorchLimitExceeded)}});
}

TEST_CASE(
    "formats hostile: Limits::max_overlapping_view_bytes is the open's, kept by its tensors") {
  // 64 x 64 float32 elements over 8: 16 KiB shown of a 32-byte storage.
  const Geometry expanded{"expanded", 0, {64, 64}, {0, 0}, Errc::kOk};
  for (const auto& bytes : {zip_checkpoint(shared_storage_pickle(expanded)),
                            legacy_checkpoint(legacy_shared_pickle(expanded), 8)}) {
    const auto loose = pthload::load(std::span<const std::byte>(bytes));
    CHECK(loose.tensor("b").contiguous_bytes().size() == 64 * 64 * 4);
    pthload::LoadOptions strict;
    strict.limits.max_overlapping_view_bytes = 64 * 64 * 4 - 1;
    const pthload::Tensor b = [&] {
      const auto checkpoint = pthload::load(std::span<const std::byte>(bytes), strict);
      return checkpoint.tensor("b");
    }();
    // The Checkpoint is gone; its limit stays with the tensor's storage.
    CHECK(error_code_of([&] { (void)b.content_checksum(); }) == Errc::kTorchLimitExceeded);
    CHECK(error_code_of([&] { (void)b.contiguous_bytes(); }) == Errc::kTorchLimitExceeded);
    std::vector<std::byte> out(64 * 64 * 4);
    CHECK(error_code_of([&] { (void)b.copy_to(out); }) == Errc::kTorchLimitExceeded);
    // A view that does not overlap itself is never limited.
    pthload::LoadOptions tiny;
    tiny.limits.max_overlapping_view_bytes = 1;
    CHECK(pthload::load(std::span<const std::byte>(bytes), tiny).tensor("a").content_checksum() ==
          loose.tensor("a").content_checksum());
  }
}

TEST_CASE("formats hostile: storages whose element count is 2^63, 2^64-1, 2^32-1") {
  const Geometry fine{"fine", 0, {8}, {1}, Errc::kOk};
  std::vector<Case> cases;
  for (const auto& [label, count] : kHugeCounts) {
    const std::string v = label;
    const auto numel = static_cast<std::int64_t>(count);
    // 2^63 and 2^64-1 are negative as the pickle's int64: no element count at all.
    const bool negative = numel < 0;
    // The pickle's numel: a zip record of 32 bytes cannot hold it.
    cases.push_back({"zip: persistent id numel " + v,
                     zip_checkpoint(shared_storage_pickle(fine, numel)),
                     code(negative ? Errc::kTorchBadPersistentId : Errc::kTorchStorageTooSmall)});
    // The legacy storage table's count, and the pickle's numel against a true count.
    cases.push_back({"legacy: storage table count " + v,
                     legacy_checkpoint(legacy_shared_pickle(fine), count),
                     code(Errc::kLegacyStorageOutOfBounds)});
    cases.push_back({"legacy: persistent id numel " + v,
                     legacy_checkpoint(legacy_shared_pickle(fine, numel), 8),
                     code(negative                  ? Errc::kTorchBadPersistentId
                          : count > kFloatsIn64Bits ? Errc::kTorchStorageTooSmall
                                                    : Errc::kLegacyStorageSizeMismatch)});
    // A legacy view (key, offset, numel) of the root storage with huge bounds.
    PickleWriter view;
    view.empty_dict().mark().str("v");
    lb::tensor(view, "FloatStorage", "100", 8, 0, {1}, {1}, lb::View{"200", numel, 1});
    view.str("w");
    lb::tensor(view, "FloatStorage", "100", 8, 0, {1}, {1}, lb::View{"201", 0, numel});
    cases.push_back({"legacy: view offset and numel " + v,
                     legacy_checkpoint(view.setitems().stop().bytes(), 8),
                     code(negative ? Errc::kTorchBadPersistentId : Errc::kLegacyViewOutOfRange)});
  }
  // A key list of a million storages with the data of one: the table must be read as it goes,
  // not reserved from the key count.
  {
    PickleWriter keys;
    keys.empty_list().mark();
    for (int i = 0; i < 1'000'000; ++i)
      keys.str(std::to_string(i));
    const auto main = legacy_shared_pickle(fine);
    cases.push_back(
        {"legacy: a million keys, one storage",
         pthload::test::bytes_of(legacy_header() + main + keys.appends().stop().bytes() +
                                 lb::count(8) + lb::floats(8)),
         code(Errc::kLegacyKeyMismatch)});
  }
  run_cases(cases);
}

TEST_CASE("formats hostile: a TorchScript archive whose constants name missing records") {
  PickleWriter data;
  data.empty_dict().stop();
  PickleWriter constants;
  constants.mark().tensor_v2("FloatStorage", "0", 3, 0, {3}, {1});
  constants.tensor_v2("FloatStorage", "7", k2to62, 0, {3}, {1}).tuple().stop();
  const auto bytes = pthload::test::checkpoint_archive(
                         data.bytes(), {{.name = "ck/constants.pkl", .data = constants.bytes()},
                                        {.name = "ck/constants/0", .data = std::string(12, '\2')}})
                         .bytes;
  run_cases({{"constants.pkl refers to constants/7, which is missing", bytes,
              code(Errc::kTorchStorageRecordMissing)}});
}

TEST_SUITE_END();
