// Hostile zip containers around a valid torch checkpoint: lengths of 2^63, 2^64-1 and 2^32-1 in
// every size, count and offset; offsets that point at their own record; records claiming 2^40
// bytes; deflate bombs. Each case is one corruption of a file that otherwise loads.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "formats/hostile_cases.hpp"
#include "support/checkpoint_file.hpp"
#include "support/pickle_writer.hpp"
#include "support/zip_builder.hpp"

using pthload::Errc;
using pthload::test::float_record;
using pthload::test::PickleWriter;
using namespace pthload::test::hostile;
namespace build = pthload::test::zip_build;
namespace cf = build::central_field;
namespace ef = build::end_field;
namespace zf = build::zip64_end_field;
namespace lf = build::locator_field;

namespace {

constexpr std::uint64_t k2to63 = std::uint64_t{1} << 63;
constexpr std::uint64_t k2to64m1 = ~std::uint64_t{0};
constexpr std::uint64_t k2to32m1 = 0xFFFF'FFFF;
constexpr std::uint64_t k2to40 = std::uint64_t{1} << 40;

struct Huge {
  const char* name;
  std::uint64_t value;
};
constexpr Huge kHuge[] = {{"2^63", k2to63}, {"2^64-1", k2to64m1}, {"2^32-1", k2to32m1}};

// {'w': a float32 tensor of 4 elements over storage '0'}: data.pkl, data/0, version.
std::vector<build::Record> torch_records(bool deflate_storage = false) {
  PickleWriter p;
  p.empty_dict().mark().str("w").tensor_v2("FloatStorage", "0", 4, 0, {4}, {1});
  p.setitems().stop();
  return {{.name = "ck/data.pkl", .data = p.bytes()},
          {.name = "ck/data/0", .data = float_record(4), .deflate = deflate_storage},
          {.name = "ck/version", .data = "3\n"}};
}

constexpr std::size_t kStorage = 1;  // index of ck/data/0 in torch_records()

build::Built zip64_extra_archive(bool deflate_storage = false) {
  return build::build(torch_records(deflate_storage), {.zip64_extra = true});
}

Case poked(std::string name, build::Built built, std::uint64_t at, unsigned width,
           std::uint64_t value, Expect expect) {
  build::poke(built.bytes, at, width, value);
  return {std::move(name), std::move(built.bytes), expect};
}

}  // namespace

TEST_SUITE_BEGIN("hostile");

TEST_CASE("formats hostile: the unmodified archives load") {
  run_cases({{"zip64 extra", zip64_extra_archive().bytes, code(Errc::kOk)},
             {"classic", build::build(torch_records()).bytes, code(Errc::kOk)},
             {"deflated storage", zip64_extra_archive(true).bytes, code(Errc::kOk)}});
}

TEST_CASE("formats hostile: zip sizes, counts and offsets of 2^63, 2^64-1, 2^32-1") {
  std::vector<Case> cases;
  for (const auto& [label, value] : kHuge) {
    const std::string v = label;
    const auto built = zip64_extra_archive();
    const auto extra = built.records[kStorage].central_extra;
    // The zip64 extra field (APPNOTE 4.5.3): id, size, then uncompressed size, compressed size,
    // local header offset, each 8 bytes.
    cases.push_back(poked("zip64 extra uncompressed size " + v, built, extra + 4, 8, value,
                          code(Errc::kZipCentralDirectoryEntryInvalid)));
    cases.push_back(poked("zip64 extra compressed size " + v, built, extra + 12, 8, value,
                          code(Errc::kZipRecordOutOfBounds)));
    cases.push_back(poked("zip64 extra local header offset " + v, built, extra + 20, 8, value,
                          code(Errc::kZipRecordOutOfBounds)));
    // The zip64 end record and its locator.
    const auto z = built.zip64_end_record;
    cases.push_back(poked("zip64 end record size " + v, built, z + zf::kRecordSize, 8, value,
                          code(Errc::kZip64EndRecordInvalid)));
    cases.push_back(poked("zip64 end entries " + v, built, z + zf::kEntries, 8, value,
                          code(Errc::kZipEntryCountMismatch)));
    cases.push_back(poked("zip64 end entries on disk " + v, built, z + zf::kEntriesOnDisk, 8, value,
                          code(Errc::kZipEntryCountMismatch)));
    cases.push_back(poked("zip64 end central directory size " + v, built,
                          z + zf::kCentralDirectorySize, 8, value,
                          code(Errc::kZip64EndRecordInvalid)));
    cases.push_back(poked("zip64 end central directory offset " + v, built,
                          z + zf::kCentralDirectoryOffset, 8, value,
                          code(Errc::kZip64EndRecordInvalid)));
    cases.push_back(poked("zip64 locator end record offset " + v, built,
                          built.zip64_locator + lf::kZip64EndRecordOffset, 8, value,
                          code(Errc::kZip64LocatorInvalid)));
    // Both sizes at once: a stored record that claims what the file does not hold.
    auto both = zip64_extra_archive();
    build::poke_le64(both.bytes, extra + 4, value);
    cases.push_back(poked("zip64 extra both sizes " + v, both, extra + 12, 8, value,
                          code(Errc::kZipRecordOutOfBounds)));
  }
  // 32-bit fields of an archive without zip64: the largest values that are not the zip64
  // sentinel, and the sentinel without a zip64 extra field to resolve it.
  for (const std::uint64_t value : {k2to32m1 - 1, k2to32m1}) {
    const std::string v = value == k2to32m1 ? "2^32-1" : "2^32-2";
    const auto built = build::build(torch_records(), {.zip64_end = false});
    const auto ch = built.records[kStorage].central_header;
    cases.push_back(poked(
        "central compressed size " + v, built, ch + cf::kCompressedSize, 4, value,
        code(value == k2to32m1 ? Errc::kZip64ExtraFieldInvalid : Errc::kZipRecordOutOfBounds)));
    cases.push_back(poked("central uncompressed size " + v, built, ch + cf::kSize, 4, value,
                          code(value == k2to32m1 ? Errc::kZip64ExtraFieldInvalid
                                                 : Errc::kZipCentralDirectoryEntryInvalid)));
    cases.push_back(poked(
        "central local header offset " + v, built, ch + cf::kLocalHeaderOffset, 4, value,
        code(value == k2to32m1 ? Errc::kZip64ExtraFieldInvalid : Errc::kZipRecordOutOfBounds)));
    cases.push_back(poked("end record central directory size " + v, built,
                          built.end_record + ef::kCentralDirectorySize, 4, value,
                          code(Errc::kZipCentralDirectoryOutOfBounds)));
    cases.push_back(poked("end record central directory offset " + v, built,
                          built.end_record + ef::kCentralDirectoryOffset, 4, value,
                          code(Errc::kZipCentralDirectoryOutOfBounds)));
  }
  run_cases(cases);
}

TEST_CASE("formats hostile: zip offsets that point at their own record") {
  std::vector<Case> cases;
  {
    const auto built = zip64_extra_archive();
    cases.push_back(poked("zip64 end record's central directory offset is the record itself", built,
                          built.zip64_end_record + zf::kCentralDirectoryOffset, 8,
                          built.zip64_end_record, code(Errc::kZip64EndRecordInvalid)));
    cases.push_back(poked("zip64 locator points at itself", built,
                          built.zip64_locator + lf::kZip64EndRecordOffset, 8, built.zip64_locator,
                          code(Errc::kZip64LocatorInvalid)));
    cases.push_back(poked("zip64 locator points at the classic end record", built,
                          built.zip64_locator + lf::kZip64EndRecordOffset, 8, built.end_record,
                          code(Errc::kZip64LocatorInvalid)));
    const auto extra = built.records[kStorage].central_extra;
    cases.push_back(poked("local header offset is the record's own central header", built,
                          extra + 20, 8, built.records[kStorage].central_header,
                          code(Errc::kZipLocalHeaderInvalid)));
    cases.push_back(poked("local header offset is another record's local header", built, extra + 20,
                          8, built.records[0].local_header, code(Errc::kZipLocalHeaderMismatch)));
  }
  {
    const auto built = build::build(torch_records(), {.zip64_end = false});
    auto self = built;
    build::poke_le32(self.bytes, built.end_record + ef::kCentralDirectorySize, 22);
    cases.push_back(poked("end record's central directory is the end record itself", self,
                          built.end_record + ef::kCentralDirectoryOffset, 4, built.end_record,
                          code(Errc::kZipCentralDirectoryOutOfBounds)));
    cases.push_back(poked("classic local header offset is the central header", built,
                          built.records[kStorage].central_header + cf::kLocalHeaderOffset, 4,
                          built.records[kStorage].central_header,
                          code(Errc::kZipLocalHeaderInvalid)));
  }
  run_cases(cases);
}

TEST_CASE("formats hostile: records that claim 2^40 bytes") {
  std::vector<Case> cases;
  for (const bool deflated : {false, true}) {
    const std::string method = deflated ? "deflated" : "stored";
    const auto built = zip64_extra_archive(deflated);
    const auto extra = built.records[kStorage].central_extra;
    // Only the uncompressed size: a stored record's sizes disagree; a deflated one claims a
    // ratio deflate cannot reach.
    cases.push_back(poked(method + " record claims 2^40 uncompressed bytes", built, extra + 4, 8,
                          k2to40,
                          code(deflated ? Errc::kZipImplausibleCompressionRatio
                                        : Errc::kZipCentralDirectoryEntryInvalid)));
    auto both = built;
    build::poke_le64(both.bytes, extra + 4, k2to40);
    cases.push_back(poked(method + " record claims 2^40 bytes in both sizes", both, extra + 12, 8,
                          k2to40, code(Errc::kZipRecordOutOfBounds)));
  }
  {
    // data.pkl itself deflated and claiming 2^40 bytes: read by open(), before any storage.
    auto records = torch_records();
    records[0].deflate = true;
    auto built = build::build(records, {.zip64_extra = true});
    cases.push_back(poked("deflated data.pkl claims 2^40 bytes", built,
                          built.records[0].central_extra + 4, 8, k2to40,
                          code(Errc::kZipImplausibleCompressionRatio)));
  }
  run_cases(cases);
}

TEST_CASE("formats hostile: deflate bombs stop at the declared size or the 1032x bound") {
  // 16 MiB of zeros deflate to ~16 KiB; the storage's declared size is its real 16 bytes.
  const std::string zeros(std::size_t{16} << 20, '\0');
  std::vector<Case> cases;
  {
    auto records = torch_records(true);
    records[kStorage].data = zeros;
    auto built = build::build(records, {.zip64_extra = true});
    const auto extra = built.records[kStorage].central_extra;
    auto declared_small = built;
    build::poke_le64(declared_small.bytes, extra + 4, 16);
    cases.push_back({"16 MiB of zeros declared as 16 bytes", declared_small.bytes,
                     code(Errc::kZipInflatedSizeMismatch), 1100});
    const auto compressed = build::peek(built.bytes, extra + 12, 8);
    auto past_ratio = built;
    build::poke_le64(past_ratio.bytes, extra + 4, compressed * 1032 + 4096);
    cases.push_back({"declared size past 1032x the compressed bytes", past_ratio.bytes,
                     code(Errc::kZipImplausibleCompressionRatio), 1100});
    // Within the ratio but more than the stream holds: the buffer is bounded by the ratio, and
    // the short stream is an error.
    auto within_ratio = built;
    build::poke_le64(within_ratio.bytes, extra + 4, compressed * 1032);
    cases.push_back({"declared size at 1032x, stream shorter", within_ratio.bytes,
                     code(Errc::kZipInflatedSizeMismatch), 1100});
  }
  {
    // A deflated data.pkl that inflates to 2 MiB of EMPTY_LIST opcodes, left on the stack at
    // STOP: the inflated size (1032x) and the pickle limits bound the work together.
    auto records = torch_records();
    records[0].deflate = true;
    records[0].data = "\x80\x02" + std::string(std::size_t{2} << 20, ']') + ".";
    cases.push_back({"data.pkl inflating to 2 Mi EMPTY_LISTs",
                     build::build(records, {.zip64_extra = true}).bytes, code(Errc::kPickleBadStop),
                     1100});
  }
  run_cases(cases);
}

TEST_SUITE_END();
