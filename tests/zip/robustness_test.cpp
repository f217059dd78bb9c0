// Hostile variations of small archives: every truncation, every header field corrupted in turn,
// every byte flipped. Parsing and reading either succeed or throw pthload::Error, nothing else.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "support/zip_builder.hpp"
#include "zip/zip_test_support.hpp"

using pthload::Errc;
using pthload::test::load_outcome;
namespace build = pthload::test::zip_build;
namespace lf = build::local_field;
namespace cf = build::central_field;
namespace ef = build::end_field;
namespace zf = build::zip64_end_field;
namespace xf = build::locator_field;

namespace {

const std::vector<build::Record> kRecords = {
    {.name = "t/data.pkl", .data = "\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01K\x01u."},
    {.name = "t/data/0", .data = std::string(64, '\x42')},
};

struct Variant {
  const char* name;
  build::Options options;
  std::vector<build::Record> records;
};

std::vector<Variant> variants() {
  auto deflated = kRecords;
  deflated[0].deflate = true;
  deflated[1].deflate = true;
  // Options set field by field: from designated initializers, GCC 12 at -O3 warns that the
  // comment string may be used uninitialized (-Wmaybe-uninitialized, a false positive).
  build::Options saturated;
  saturated.saturate_end_record = true;
  saturated.zip64_extra = true;
  build::Options classic;
  classic.zip64_end = false;
  classic.data_descriptor = false;
  classic.alignment = 0;
  classic.comment = "hi";
  std::vector<Variant> result(3);
  result[0] = {"torch-like", build::Options(), kRecords};
  result[1] = {"saturated zip64", saturated, deflated};
  result[2] = {"classic with comment", classic, deflated};
  return result;
}

/// Parses and reads every record; only pthload::Error may escape (doctest reports anything
/// else as a failure of the enclosing case).
Errc load(std::span<const std::byte> bytes) {
  return load_outcome(bytes).code;
}

/// The four corruptions tried on every field.
enum Corruption { kZero, kAllOnes, kPlusOne, kMinusOne };
constexpr Corruption kCorruptions[] = {kZero, kAllOnes, kPlusOne, kMinusOne};

std::uint64_t corrupted(std::uint64_t value, unsigned width, Corruption c) {
  const std::uint64_t mask = width == 8 ? ~0ull : (1ull << (8 * width)) - 1;
  switch (c) {
    case kZero:
      return 0;
    case kAllOnes:
      return mask;
    case kPlusOne:
      return (value + 1) & mask;
    case kMinusOne:
      return (value - 1) & mask;
  }
  return value;
}

/// What a corruption of one field must do: a code per corruption, or nullopt for "anything
/// that is either success or a pthload::Error" (fields whose effect depends on the value).
using Expect = std::optional<Errc>;
struct Field {
  const char* name;
  std::uint64_t offset;
  unsigned width;
  Expect expected[4];  ///< for kZero, kAllOnes, kPlusOne, kMinusOne
};

constexpr Expect kAny = std::nullopt;
constexpr Expect kOk = Errc::kOk;

}  // namespace

TEST_SUITE_BEGIN("robustness");

TEST_CASE("zip: every prefix of an archive throws pthload::Error") {
  for (const auto& variant : variants()) {
    const std::string name = variant.name;
    CAPTURE(name);
    const auto built = build::build(variant.records, variant.options);
    REQUIRE(load(built.bytes) == Errc::kOk);
    for (std::size_t size = 0; size < built.bytes.size(); ++size) {
      CAPTURE(size);
      CHECK(load(std::span(built.bytes).first(size)) != Errc::kOk);
    }
  }
}

TEST_CASE("zip: each header field corrupted in turn throws its specific error or nothing") {
  const auto built = build::build(kRecords);  // torch-like: zip64 end records, bit 3, padding
  const auto& r = built.records[1];
  const auto lh = r.local_header, ch = r.central_header, eo = built.end_record;
  const auto z = built.zip64_end_record, loc = built.zip64_locator;
  using E = Errc;
  const std::vector<Field> fields = {
      // Local header of the last record.
      {"local signature",
       lh + lf::kSignature,
       4,
       {E::kZipLocalHeaderInvalid, E::kZipLocalHeaderInvalid, E::kZipLocalHeaderInvalid,
        E::kZipLocalHeaderInvalid}},
      {"local version", lh + lf::kVersion, 2, {kOk, kOk, kOk, kOk}},
      {"local flags", lh + lf::kFlags, 2, {kOk, E::kZipLocalHeaderMismatch, kAny, kAny}},
      {"local method",
       lh + lf::kMethod,
       2,
       {kOk, E::kZipLocalHeaderMismatch, E::kZipLocalHeaderMismatch, E::kZipLocalHeaderMismatch}},
      {"local time", lh + lf::kTime, 2, {kOk, kOk, kOk, kOk}},
      {"local date", lh + lf::kDate, 2, {kOk, kOk, kOk, kOk}},
      {"local crc (bit 3)", lh + lf::kCrc, 4, {kOk, kOk, kOk, kOk}},
      {"local compressed size (bit 3)", lh + lf::kCompressedSize, 4, {kOk, kOk, kOk, kOk}},
      {"local size (bit 3)", lh + lf::kSize, 4, {kOk, kOk, kOk, kOk}},
      {"local name length",
       lh + lf::kNameLength,
       2,
       {E::kZipLocalHeaderMismatch, E::kZipRecordOutOfBounds, E::kZipLocalHeaderMismatch,
        E::kZipLocalHeaderMismatch}},
      {"local extra length",
       lh + lf::kExtraLength,
       2,
       {E::kZipCrcMismatch, E::kZipRecordOutOfBounds, E::kZipCrcMismatch, E::kZipCrcMismatch}},
      // Central header of the last record.
      {"central signature",
       ch + cf::kSignature,
       4,
       {E::kZipCentralDirectoryEntryInvalid, E::kZipCentralDirectoryEntryInvalid,
        E::kZipCentralDirectoryEntryInvalid, E::kZipCentralDirectoryEntryInvalid}},
      {"version made by", ch + cf::kVersionMadeBy, 2, {kOk, kOk, kOk, kOk}},
      {"version needed", ch + cf::kVersion, 2, {kOk, kOk, kOk, kOk}},
      {"central flags", ch + cf::kFlags, 2, {kOk, E::kZipLocalHeaderMismatch, kAny, kAny}},
      {"central method",
       ch + cf::kMethod,
       2,
       {kOk, E::kZipLocalHeaderMismatch, E::kZipLocalHeaderMismatch, E::kZipLocalHeaderMismatch}},
      {"central time", ch + cf::kTime, 2, {kOk, kOk, kOk, kOk}},
      {"central date", ch + cf::kDate, 2, {kOk, kOk, kOk, kOk}},
      {"central crc",
       ch + cf::kCrc,
       4,
       {E::kZipCrcMismatch, E::kZipCrcMismatch, E::kZipCrcMismatch, E::kZipCrcMismatch}},
      {"central compressed size",
       ch + cf::kCompressedSize,
       4,
       {E::kZipCentralDirectoryEntryInvalid, E::kZip64ExtraFieldInvalid,
        E::kZipCentralDirectoryEntryInvalid, E::kZipCentralDirectoryEntryInvalid}},
      {"central size",
       ch + cf::kSize,
       4,
       {E::kZipCentralDirectoryEntryInvalid, E::kZip64ExtraFieldInvalid,
        E::kZipCentralDirectoryEntryInvalid, E::kZipCentralDirectoryEntryInvalid}},
      {"central name length",
       ch + cf::kNameLength,
       2,
       {E::kZipEntryCountMismatch, E::kZipCentralDirectoryEntryInvalid,
        E::kZipCentralDirectoryEntryInvalid, E::kZipEntryCountMismatch}},
      {"central extra length",
       ch + cf::kExtraLength,
       2,
       {kOk, E::kZipCentralDirectoryEntryInvalid, E::kZipCentralDirectoryEntryInvalid, kAny}},
      {"central comment length",
       ch + cf::kCommentLength,
       2,
       {kOk, E::kZipCentralDirectoryEntryInvalid, E::kZipCentralDirectoryEntryInvalid, kAny}},
      {"central disk",
       ch + cf::kDisk,
       2,
       {kOk, E::kZip64ExtraFieldInvalid, E::kZipMultiDiskUnsupported, E::kZip64ExtraFieldInvalid}},
      {"internal attributes", ch + cf::kInternalAttributes, 2, {kOk, kOk, kOk, kOk}},
      {"external attributes", ch + cf::kExternalAttributes, 4, {kOk, kOk, kOk, kOk}},
      {"local header offset",
       ch + cf::kLocalHeaderOffset,
       4,
       {E::kZipLocalHeaderMismatch, E::kZip64ExtraFieldInvalid, E::kZipLocalHeaderInvalid,
        E::kZipLocalHeaderInvalid}},
      // Zip64 end record (the classic end record's copies are not saturated, so they must agree).
      {"zip64 signature",
       z + zf::kSignature,
       4,
       {E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid,
        E::kZip64EndRecordInvalid}},
      {"zip64 record size",
       z + zf::kRecordSize,
       8,
       {E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid,
        E::kZip64EndRecordInvalid}},
      {"zip64 version made by", z + zf::kVersionMadeBy, 2, {kOk, kOk, kOk, kOk}},
      {"zip64 version needed", z + zf::kVersion, 2, {kOk, kOk, kOk, kOk}},
      {"zip64 disk",
       z + zf::kDisk,
       4,
       {kOk, E::kZipMultiDiskUnsupported, E::kZipMultiDiskUnsupported,
        E::kZipMultiDiskUnsupported}},
      {"zip64 central directory disk",
       z + zf::kCentralDirectoryDisk,
       4,
       {kOk, E::kZipMultiDiskUnsupported, E::kZipMultiDiskUnsupported,
        E::kZipMultiDiskUnsupported}},
      {"zip64 entries on disk",
       z + zf::kEntriesOnDisk,
       8,
       {E::kZipEntryCountMismatch, E::kZipEntryCountMismatch, E::kZipEntryCountMismatch,
        E::kZipEntryCountMismatch}},
      {"zip64 entries",
       z + zf::kEntries,
       8,
       {E::kZipEntryCountMismatch, E::kZipEntryCountMismatch, E::kZipEntryCountMismatch,
        E::kZipEntryCountMismatch}},
      {"zip64 central directory size",
       z + zf::kCentralDirectorySize,
       8,
       {E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid,
        E::kZip64EndRecordInvalid}},
      {"zip64 central directory offset",
       z + zf::kCentralDirectoryOffset,
       8,
       {E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid,
        E::kZip64EndRecordInvalid}},
      // Zip64 locator.
      {"locator signature", loc + xf::kSignature, 4, {kOk, kOk, kOk, kOk}},
      {"locator disk",
       loc + xf::kDisk,
       4,
       {kOk, E::kZipMultiDiskUnsupported, E::kZipMultiDiskUnsupported,
        E::kZipMultiDiskUnsupported}},
      {"locator zip64 offset",
       loc + xf::kZip64EndRecordOffset,
       8,
       {E::kZip64EndRecordInvalid, E::kZip64LocatorInvalid, E::kZip64LocatorInvalid,
        E::kZip64EndRecordInvalid}},
      {"locator disks",
       loc + xf::kDisks,
       4,
       {kOk, E::kZipMultiDiskUnsupported, E::kZipMultiDiskUnsupported, kOk}},
      // Classic end record.
      {"end signature",
       eo + ef::kSignature,
       4,
       {E::kZipEndRecordNotFound, E::kZipEndRecordNotFound, E::kZipEndRecordNotFound,
        E::kZipEndRecordNotFound}},
      // 0xFFFF (also what -1 gives) means "see the zip64 end record".
      {"end disk", eo + ef::kDisk, 2, {kOk, kOk, E::kZipMultiDiskUnsupported, kOk}},
      {"end central directory disk",
       eo + ef::kCentralDirectoryDisk,
       2,
       {kOk, kOk, E::kZipMultiDiskUnsupported, kOk}},
      {"end entries on disk",
       eo + ef::kEntriesOnDisk,
       2,
       {E::kZip64EndRecordInvalid, kOk, E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid}},
      {"end entries",
       eo + ef::kEntries,
       2,
       {E::kZip64EndRecordInvalid, kOk, E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid}},
      {"end central directory size",
       eo + ef::kCentralDirectorySize,
       4,
       {E::kZip64EndRecordInvalid, kOk, E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid}},
      {"end central directory offset",
       eo + ef::kCentralDirectoryOffset,
       4,
       {E::kZip64EndRecordInvalid, kOk, E::kZip64EndRecordInvalid, E::kZip64EndRecordInvalid}},
      {"end comment length",
       eo + ef::kCommentLength,
       2,
       {kOk, E::kZipEndRecordTruncated, E::kZipEndRecordTruncated, E::kZipEndRecordTruncated}},
  };
  for (const auto& field : fields) {
    const auto original = build::peek(built.bytes, field.offset, field.width);
    for (const auto c : kCorruptions) {
      const std::string name = field.name;
      const int corruption = c;
      CAPTURE(name);
      CAPTURE(corruption);
      auto bytes = built.bytes;
      build::poke(bytes, field.offset, field.width, corrupted(original, field.width, c));
      const Errc code = load(bytes);
      // A corruption that leaves the value unchanged must leave the archive readable.
      const Expect expected =
          corrupted(original, field.width, c) == original ? kOk : field.expected[c];
      if (expected) CHECK(code == *expected);
    }
  }
}

TEST_CASE("zip: every byte flipped in turn throws pthload::Error or nothing") {
  for (const auto& variant : variants()) {
    const std::string name = variant.name;
    CAPTURE(name);
    const auto built = build::build(variant.records, variant.options);
    for (std::size_t i = 0; i < built.bytes.size(); ++i) {
      for (const std::uint8_t value : {0x00, 0xFF, 0x01, 0x80}) {
        auto bytes = built.bytes;
        bytes[i] = value == 0x01 || value == 0x80 ? bytes[i] ^ std::byte{value} : std::byte{value};
        (void)load(bytes);  // anything but pthload::Error fails the case
      }
    }
  }
}

TEST_SUITE_END();
