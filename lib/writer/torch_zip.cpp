// Field by field after APPNOTE.TXT 6.3.x and miniz 2.x's mz_zip_writer_add_mem_ex_v2 as torch
// calls it (level 0, a user extra field of padding, zip64 mode on), with torch's getPadding().
#include "writer/torch_zip.hpp"

#include <array>
#include <cassert>
#include <limits>
#include <utility>

#include "zip/crc.hpp"

namespace pthload::writer {
namespace {

constexpr std::uint64_t kMax32 = std::numeric_limits<std::uint32_t>::max();
constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::size_t kCentralHeaderSize = 46;
constexpr std::size_t kZip64EndSize = 56;
constexpr std::size_t kZip64LocatorSize = 20;
constexpr std::size_t kEndSize = 22;
constexpr std::uint16_t kFlagDescriptor = 0x0008;  // sizes and CRC follow the payload
constexpr std::uint16_t kFlagUtf8 = 0x0800;        // names are UTF-8
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint16_t kPaddingExtraId = 0x4246;  // "FB": torch's padding field

// Little-endian fields, appended.
class Fields {
 public:
  Fields& u16(std::uint64_t value) { return put(value, 2); }
  Fields& u32(std::uint64_t value) { return put(value, 4); }
  Fields& u64(std::uint64_t value) { return put(value, 8); }
  Fields& text(std::string_view text) {
    for (const char c : text)
      bytes_.push_back(static_cast<std::byte>(c));
    return *this;
  }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }

 private:
  Fields& put(std::uint64_t value, int count) {
    for (int i = 0; i < count; ++i)
      bytes_.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
    return *this;
  }
  std::vector<std::byte> bytes_;
};

// miniz writes a zip64 extra field (and a 24-byte descriptor) for a record whose size or
// header offset reaches 2^32 - 1: sizes when the size does, the offset when the offset does.
bool needs_zip64(std::uint64_t offset, std::uint64_t size) {
  return offset >= kMax32 || size >= kMax32;
}
std::size_t zip64_extra_size(std::uint64_t offset, std::uint64_t size) {
  if (!needs_zip64(offset, size)) return 0;
  return 4 + (size >= kMax32 ? 16 : 0) + (offset >= kMax32 ? 8 : 0);
}

// torch's getPadding(): the pad that puts the payload on `alignment`, counting the FB field's
// own four bytes.
std::uint64_t padding(std::uint64_t offset, std::size_t name_size, std::uint64_t size,
                      std::uint32_t alignment) {
  const std::uint64_t start =
      offset + kLocalHeaderSize + name_size + 4 + zip64_extra_size(offset, size);
  return (alignment - start % alignment) % alignment;
}

std::size_t descriptor_size(std::uint64_t offset, std::uint64_t size) {
  if (size == 0) return 0;  // miniz writes none for an empty record (and leaves bit 3 clear)
  return needs_zip64(offset, size) ? 24 : 16;
}

std::uint16_t flags(std::uint64_t size) {
  return static_cast<std::uint16_t>(kFlagUtf8 | (size > 0 ? kFlagDescriptor : 0));
}

}  // namespace

std::uint64_t record_footprint(std::uint64_t offset, std::size_t name_size, std::uint64_t size,
                               std::uint32_t alignment) {
  return kLocalHeaderSize + name_size + zip64_extra_size(offset, size) + 4 +
         padding(offset, name_size, size, alignment) + size + descriptor_size(offset, size);
}

std::uint64_t directory_footprint(std::span<const std::size_t> name_sizes,
                                  std::span<const std::uint64_t> offsets,
                                  std::span<const std::uint64_t> sizes) {
  std::uint64_t total = kZip64EndSize + kZip64LocatorSize + kEndSize;
  for (std::size_t i = 0; i < name_sizes.size(); ++i)
    total += kCentralHeaderSize + name_sizes[i] + zip64_extra_size(offsets[i], sizes[i]);
  return total;
}

TorchZipWriter::TorchZipWriter(Output& output, std::string archive, std::uint32_t alignment)
    : output_(output), archive_(std::move(archive)), alignment_(alignment) {}

void TorchZipWriter::begin_record(std::string_view name, std::uint64_t size,
                                  std::optional<std::uint32_t> known_crc) {
  assert(!in_record_);
  Entry entry{.name = archive_ + "/" + std::string(name),
              .header_offset = output_.offset(),
              .size = size,
              .crc = known_crc.value_or(0),
              .crc_known = known_crc.has_value()};
  const std::uint64_t offset = entry.header_offset;
  const std::uint64_t pad = padding(offset, entry.name.size(), size, alignment_);
  const std::size_t zip64 = zip64_extra_size(offset, size);
  Fields header;
  header.u32(0x04034b50)
      .u16(zip64 > 0 ? 45 : 0)  // version needed: 4.5 for zip64, as APPNOTE asks
      .u16(flags(size))
      .u16(0)  // stored
      .u16(0)  // time
      .u16(0)  // date: torch writes none, so the same tensors give the same bytes
      .u32(0)  // CRC-32, sizes: in the descriptor (bit 3)
      .u32(0)
      .u32(0)
      .u16(entry.name.size())
      .u16(zip64 + 4 + pad)
      .text(entry.name);
  if (zip64 > 0) {
    // The sizes here are zero as in the fixed fields: with bit 3 they follow the payload.
    header.u16(kZip64ExtraId).u16(zip64 - 4);
    if (size >= kMax32) header.u64(0).u64(0);
    if (offset >= kMax32) header.u64(offset);
  }
  header.u16(kPaddingExtraId).u16(pad);
  output_.write(header.bytes());
  output_.fill(std::byte{'Z'}, pad);
  entries_.push_back(std::move(entry));
  remaining_ = size;
  in_record_ = true;
}

void TorchZipWriter::write(std::span<const std::byte> bytes) {
  assert(in_record_ && bytes.size() <= remaining_);
  Entry& entry = entries_.back();
  assert(!entry.crc_known);
  entry.crc = zip::crc32_update(entry.crc, bytes);
  output_.write(bytes);
  remaining_ -= bytes.size();
}

void TorchZipWriter::write_copy_of(std::span<const std::byte> bytes, int fd, std::uint64_t offset) {
  assert(in_record_ && bytes.size() <= remaining_);
  Entry& entry = entries_.back();
  assert(!entry.crc_known);
  entry.crc = zip::crc32_update(entry.crc, bytes);
  output_.write_copy_of(bytes, fd, offset);
  remaining_ -= bytes.size();
}

void TorchZipWriter::copy_of(int fd, std::uint64_t offset, std::uint64_t size,
                             const Output::SourceReader& read) {
  assert(in_record_ && size <= remaining_ && entries_.back().crc_known);
  output_.copy_from(fd, offset, size, read);
  remaining_ -= size;
}

void TorchZipWriter::end_record() {
  assert(in_record_ && remaining_ == 0);
  in_record_ = false;
  const Entry& entry = entries_.back();
  if (entry.size == 0) return;
  Fields descriptor;
  descriptor.u32(0x08074b50).u32(entry.crc);
  if (needs_zip64(entry.header_offset, entry.size)) {
    descriptor.u64(entry.size).u64(entry.size);
  } else {
    descriptor.u32(entry.size).u32(entry.size);
  }
  output_.write(descriptor.bytes());
}

void TorchZipWriter::add_record(std::string_view name, std::span<const std::byte> bytes) {
  begin_record(name, bytes.size());
  write(bytes);
  end_record();
}

void TorchZipWriter::finish() {
  assert(!in_record_);
  const std::uint64_t directory_offset = output_.offset();
  for (const Entry& entry : entries_) {
    const std::uint64_t offset = entry.header_offset;
    const std::size_t zip64 = zip64_extra_size(offset, entry.size);
    const std::uint64_t size32 = entry.size >= kMax32 ? kMax32 : entry.size;
    Fields central;
    central.u32(0x02014b50)
        .u16(0)  // made by: MS-DOS attributes, none set (as torch)
        .u16(zip64 > 0 ? 45 : 0)
        .u16(flags(entry.size))
        .u16(0)
        .u16(0)
        .u16(0)
        .u32(entry.crc)
        .u32(size32)
        .u32(size32)
        .u16(entry.name.size())
        .u16(zip64)
        .u16(0)  // comment
        .u16(0)  // disk
        .u16(0)  // internal attributes
        .u32(0)  // external attributes
        .u32(offset >= kMax32 ? kMax32 : offset)
        .text(entry.name);
    if (zip64 > 0) {
      central.u16(kZip64ExtraId).u16(zip64 - 4);
      if (entry.size >= kMax32) central.u64(entry.size).u64(entry.size);
      if (offset >= kMax32) central.u64(offset);
    }
    output_.write(central.bytes());
  }
  const std::uint64_t directory_size = output_.offset() - directory_offset;
  const std::uint64_t zip64_end_offset = output_.offset();
  const std::uint64_t count = entries_.size();
  Fields end;
  end.u32(0x06064b50)
      .u64(kZip64EndSize - 12)
      .u16(0x031e)  // made by: Unix, 3.0 (what miniz writes)
      .u16(45)
      .u32(0)
      .u32(0)
      .u64(count)
      .u64(count)
      .u64(directory_size)
      .u64(directory_offset);
  end.u32(0x07064b50).u32(0).u64(zip64_end_offset).u32(1);
  end.u32(0x06054b50)
      .u16(0)
      .u16(0)
      .u16(count >= 0xffff ? 0xffff : count)
      .u16(count >= 0xffff ? 0xffff : count)
      .u32(directory_size >= kMax32 ? kMax32 : directory_size)
      .u32(directory_offset >= kMax32 ? kMax32 : directory_offset)
      .u16(0);
  output_.write(end.bytes());
}

}  // namespace pthload::writer
