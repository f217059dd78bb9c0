// Local file headers: the per-record header before each payload (APPNOTE 4.3.7).
#include "zip/local_header.hpp"

#include <string_view>

#include <fmt/format.h>

#include "common/byte_reader.hpp"
#include "common/check.hpp"
#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "zip/extra_field.hpp"
#include "zip/short_bytes.hpp"
#include "zip/signatures.hpp"

namespace pthload::zip {
namespace {

using common::ByteReader;
using common::fits;

[[noreturn]] void mismatch(const Entry& entry, std::string_view what, std::uint64_t local,
                           std::uint64_t central, std::uint64_t offset) {
  throw FormatError(Errc::kZipLocalHeaderMismatch,
                    fmt::format("local header {} {:#x} differs from the central directory's {:#x}",
                                what, local, central),
                    {.record = std::string(entry.name), .offset = offset});
}

void compare_sizes(const Entry& entry, std::uint64_t local_compressed,
                   std::uint64_t local_uncompressed, std::span<const std::byte> extra,
                   std::uint64_t header_offset) {
  // Saturated local sizes live in the local zip64 extra field (uncompressed first); when it is
  // missing or short there is nothing trustworthy to compare, and the central directory rules.
  if (local_uncompressed == kSaturated32 || local_compressed == kSaturated32) {
    const auto field = find_extra_field(extra, kZip64ExtraId);
    if (!field) return;
    ByteReader reader(*field, Errc::kZipLocalHeaderInvalid);
    const std::size_t needed = (local_uncompressed == kSaturated32 ? 8u : 0u) +
                               (local_compressed == kSaturated32 ? 8u : 0u);
    if (reader.remaining() < needed) return;
    if (local_uncompressed == kSaturated32) local_uncompressed = reader.le<std::uint64_t>("size");
    if (local_compressed == kSaturated32) local_compressed = reader.le<std::uint64_t>("size");
  }
  if (local_compressed != 0 && local_compressed != entry.compressed_size) {
    mismatch(entry, "compressed size", local_compressed, entry.compressed_size, header_offset + 18);
  }
  if (local_uncompressed != 0 && local_uncompressed != entry.uncompressed_size) {
    mismatch(entry, "uncompressed size", local_uncompressed, entry.uncompressed_size,
             header_offset + 22);
  }
}

// Sets entry.data_offset and returns true when the header is as torch writes it: whole in
// `from_header`, signed, with flag bit 3 (no local CRC or sizes to compare), the central
// directory's method, encryption flags and name, and a payload inside the file. Returns false,
// changing nothing, for anything else, which the checked reader below then reports as it always
// has: read at fixed offsets, without a bounds check and error context per field, a torch header
// costs a quarter of what it did.
bool resolve_plain_local_header(std::span<const std::byte> from_header, std::uint64_t file_size,
                                Entry& entry) noexcept {
  using common::load_le;
  const std::uint64_t offset = entry.local_header_offset;
  if (from_header.size() < kLocalHeaderSize || !fits(offset, kLocalHeaderSize, file_size)) {
    return false;
  }
  const std::byte* header = from_header.data();
  const std::size_t name_size = load_le<std::uint16_t>(header + 26);
  const std::size_t header_size =
      kLocalHeaderSize + name_size + load_le<std::uint16_t>(header + 28);
  const auto flags = load_le<std::uint16_t>(header + 6);
  constexpr auto kEncryption = kFlagEncrypted | kFlagStrongEncryption;
  if (load_le<std::uint32_t>(header) != kLocalHeaderSignature || header_size > from_header.size() ||
      (flags & kFlagDataDescriptor) == 0 || load_le<std::uint16_t>(header + 8) != entry.method ||
      ((flags ^ entry.flags) & kEncryption) != 0 || name_size != entry.name.size() ||
      !equal_bytes(header + kLocalHeaderSize, reinterpret_cast<const std::byte*>(entry.name.data()),
                   name_size)) {
    return false;
  }
  const std::uint64_t data_offset = offset + header_size;
  if (!fits(data_offset, entry.compressed_size, file_size)) return false;
  entry.data_offset = data_offset;
  return true;
}

// Every other header, field by field through ByteReader. Kept out of line, so that the plain
// check saves no registers for it.
[[gnu::noinline]] void resolve_checked_local_header(std::span<const std::byte> from_header,
                                                    std::uint64_t file_size, Entry& entry) {
  const std::uint64_t offset = entry.local_header_offset;
  if (!fits(offset, kLocalHeaderSize, file_size)) {
    throw FormatError(
        Errc::kZipRecordOutOfBounds,
        fmt::format("local header at {:#x} runs past end of file ({:#x} bytes)", offset, file_size),
        {.record = std::string(entry.name), .offset = offset});
  }
  common::with_context({.record = entry.name}, [&] {
    ByteReader reader(from_header, Errc::kZipRecordOutOfBounds, offset);
    if (reader.le<std::uint32_t>("local header signature") != kLocalHeaderSignature) {
      throw FormatError(Errc::kZipLocalHeaderInvalid, "local header has no PK\\3\\4 signature",
                        {.offset = offset});
    }
    reader.skip(2, "version needed");
    const auto flags = reader.le<std::uint16_t>("flags");
    const auto method = reader.le<std::uint16_t>("method");
    reader.skip(4, "modification time");
    const auto crc = reader.le<std::uint32_t>("crc-32");
    const auto compressed_size = reader.le<std::uint32_t>("compressed size");
    const auto uncompressed_size = reader.le<std::uint32_t>("uncompressed size");
    const auto name_size = reader.le<std::uint16_t>("name length");
    const auto extra_size = reader.le<std::uint16_t>("extra length");
    const auto name = reader.bytes(name_size, "local name");
    const auto extra = reader.bytes(extra_size, "local extra field");
    entry.data_offset = reader.file_offset();

    // Readers that trust the local header (streaming unzip tools) and readers that trust the
    // central directory must not be shown two different records.
    const std::string_view local_name(reinterpret_cast<const char*>(name.data()), name.size());
    if (local_name != entry.name) {
      throw FormatError(Errc::kZipLocalHeaderMismatch,
                        fmt::format("local header names the record {:?}", local_name),
                        {.offset = offset + kLocalHeaderSize});
    }
    if (method != entry.method) mismatch(entry, "method", method, entry.method, offset + 8);
    const auto encryption = kFlagEncrypted | kFlagStrongEncryption;
    if ((flags & encryption) != (entry.flags & encryption)) {
      mismatch(entry, "encryption flags", flags, entry.flags, offset + 6);
    }
    // With bit 3 the local CRC and sizes are zero (torch, streaming writers) and the real values
    // follow the payload; only a header that claims values is held to them.
    if ((flags & kFlagDataDescriptor) == 0) {
      if (crc != 0 && crc != entry.crc32) mismatch(entry, "crc-32", crc, entry.crc32, offset + 14);
      compare_sizes(entry, compressed_size, uncompressed_size, extra, offset);
    }
  });
  if (!fits(entry.data_offset, entry.compressed_size, file_size)) {
    throw FormatError(Errc::kZipRecordOutOfBounds,
                      fmt::format("payload [{:#x}, +{:#x}) runs past end of file ({:#x} bytes)",
                                  entry.data_offset, entry.compressed_size, file_size),
                      {.record = std::string(entry.name), .offset = entry.data_offset});
  }
}

}  // namespace

void resolve_local_header(std::span<const std::byte> file, Entry& entry) {
  const std::uint64_t offset = entry.local_header_offset;
  resolve_local_header(offset <= file.size() ? file.subspan(offset) : std::span<const std::byte>(),
                       file.size(), entry);
}

void resolve_local_header(std::span<const std::byte> from_header, std::uint64_t file_size,
                          Entry& entry) {
  if (!resolve_plain_local_header(from_header, file_size, entry)) {
    resolve_checked_local_header(from_header, file_size, entry);
  }
}

}  // namespace pthload::zip
