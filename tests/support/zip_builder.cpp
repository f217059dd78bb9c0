// Test helper: writes small zip archives the way torch (miniz) and other writers do (APPNOTE 4.3).
#include "support/zip_builder.hpp"

#include <libdeflate.h>

#include <stdexcept>

namespace pthload::test::zip_build {
namespace {

class Writer {
 public:
  std::uint64_t position() const { return bytes_.size(); }
  void u16(std::uint64_t v) { put(v, 2); }
  void u32(std::uint64_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void text(std::string_view s) {
    const auto bytes = std::as_bytes(std::span(s.data(), s.size()));
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  void put(std::uint64_t v, unsigned width) {
    for (unsigned i = 0; i < width; ++i)
      bytes_.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  std::vector<std::byte> bytes_;
};

std::uint32_t crc_of(const std::string& data) {
  return libdeflate_crc32(0, data.data(), data.size());
}

constexpr std::uint16_t kFlagDescriptorUtf8 = 0x0808;  // what torch writes
constexpr std::uint16_t kFlagUtf8 = 0x0800;
constexpr std::uint16_t kDosTime = 0x6000, kDosDate = 0x5021;

}  // namespace

std::string deflate(const std::string& data) {
  libdeflate_compressor* compressor = libdeflate_alloc_compressor(6);
  std::string out(libdeflate_deflate_compress_bound(compressor, data.size()), '\0');
  const std::size_t size =
      libdeflate_deflate_compress(compressor, data.data(), data.size(), out.data(), out.size());
  libdeflate_free_compressor(compressor);
  if (size == 0) throw std::runtime_error("deflate failed");
  out.resize(size);
  return out;
}

Built build(const std::vector<Record>& records, const Options& options) {
  Writer w;
  Built built;
  struct Written {
    std::uint32_t crc;
    std::uint64_t compressed_size;
  };
  std::vector<Written> written;
  for (const Record& record : records) {
    const std::string payload = record.deflate ? deflate(record.data) : record.data;
    const std::string& local_name = record.local_name.empty() ? record.name : record.local_name;
    const std::uint32_t crc = crc_of(record.data);
    RecordLayout layout;
    layout.name = record.name;
    layout.local_header = w.position();
    w.u32(0x04034b50);
    w.u16(options.zip64_extra ? 45 : 20);
    w.u16(options.data_descriptor ? kFlagDescriptorUtf8 : kFlagUtf8);
    w.u16(record.deflate ? 8 : 0);
    w.u16(kDosTime);
    w.u16(kDosDate);
    w.u32(options.data_descriptor ? 0 : crc);
    w.u32(options.data_descriptor ? 0 : payload.size());
    w.u32(options.data_descriptor ? 0 : record.data.size());
    w.u16(local_name.size());
    std::uint64_t padding = 0;
    if (options.alignment != 0) {
      // torch's detail::getPadding: the `FB` field's own 4-byte header counts before the data.
      const std::uint64_t unpadded = w.position() + 2 + local_name.size() + 4;
      padding = (options.alignment - unpadded % options.alignment) % options.alignment;
      w.u16(4 + padding);
    } else {
      w.u16(0);
    }
    w.text(local_name);
    if (options.alignment != 0) {
      w.text("FB");
      w.u16(padding);
      w.text(std::string(padding, 'Z'));
    }
    layout.data = w.position();
    w.text(payload);
    if (options.data_descriptor) {
      w.u32(0x08074b50);
      w.u32(crc);
      if (options.zip64_extra) {
        w.u64(payload.size());
        w.u64(record.data.size());
      } else {
        w.u32(payload.size());
        w.u32(record.data.size());
      }
    }
    built.records.push_back(layout);
    written.push_back({crc, payload.size()});
  }

  built.central_directory = w.position();
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& record = records[i];
    RecordLayout& layout = built.records[i];
    layout.central_header = w.position();
    w.u32(0x02014b50);
    w.u16(0x031e);
    w.u16(options.zip64_extra ? 45 : 20);
    w.u16(options.data_descriptor ? kFlagDescriptorUtf8 : kFlagUtf8);
    w.u16(record.deflate ? 8 : 0);
    w.u16(kDosTime);
    w.u16(kDosDate);
    w.u32(written[i].crc);
    w.u32(options.zip64_extra ? 0xFFFF'FFFF : written[i].compressed_size);
    w.u32(options.zip64_extra ? 0xFFFF'FFFF : record.data.size());
    w.u16(record.name.size());
    w.u16(options.zip64_extra ? 28 : 0);
    w.u16(0);            // comment
    w.u16(0);            // disk
    w.u16(0);            // internal attributes
    w.u32(0x81a4'0000);  // -rw-r--r--
    w.u32(options.zip64_extra ? 0xFFFF'FFFF : layout.local_header);
    w.text(record.name);
    layout.central_extra = w.position();
    if (options.zip64_extra) {
      w.u16(1);
      w.u16(24);
      w.u64(record.data.size());
      w.u64(written[i].compressed_size);
      w.u64(layout.local_header);
    }
  }
  const std::uint64_t cd_size = w.position() - built.central_directory;

  if (options.zip64_end) {
    built.zip64_end_record = w.position();
    w.u32(0x06064b50);
    w.u64(44 + options.zip64_extensible_data.size());
    w.u16(45);
    w.u16(45);
    w.u32(0);
    w.u32(0);
    w.u64(records.size());
    w.u64(records.size());
    w.u64(cd_size);
    w.u64(built.central_directory);
    w.text(options.zip64_extensible_data);
    built.zip64_locator = w.position();
    w.u32(0x07064b50);
    w.u32(0);
    w.u64(built.zip64_end_record);
    w.u32(1);
  }
  const bool saturate = options.zip64_end && options.saturate_end_record;
  built.end_record = w.position();
  w.u32(0x06054b50);
  w.u16(0);
  w.u16(0);
  w.u16(saturate ? 0xFFFF : records.size());
  w.u16(saturate ? 0xFFFF : records.size());
  w.u32(saturate ? 0xFFFF'FFFF : cd_size);
  w.u32(saturate ? 0xFFFF'FFFF : built.central_directory);
  w.u16(options.comment.size());
  w.text(options.comment);
  built.bytes = w.take();
  return built;
}

std::uint64_t peek(std::span<const std::byte> bytes, std::uint64_t offset, unsigned width) {
  std::uint64_t value = 0;
  for (unsigned i = 0; i < width; ++i) {
    value |= std::to_integer<std::uint64_t>(bytes[offset + i]) << (8 * i);
  }
  return value;
}

void poke(std::span<std::byte> bytes, std::uint64_t offset, unsigned width, std::uint64_t value) {
  for (unsigned i = 0; i < width; ++i)
    bytes[offset + i] = static_cast<std::byte>(value >> (8 * i));
}

}  // namespace pthload::test::zip_build
