// The zip container by hand (APPNOTE 4.3: local headers, central directory, end record) around
// the pickle torch writes for {'w': tensor} with _rebuild_tensor_v2 (protocol 2).
#include "faults/checkpoint_writer.hpp"

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "zip/crc.hpp"

namespace pthload::faults {
namespace {

using Bytes = std::vector<std::byte>;

void put(Bytes& out, std::string_view text) {
  for (const char c : text)
    out.push_back(static_cast<std::byte>(c));
}

void put_le(Bytes& out, std::uint64_t value, int size) {
  for (int i = 0; i < size; ++i)
    out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xFF));
}

void put_unicode(Bytes& out, std::string_view text) {  // BINUNICODE
  put(out, "X");
  put_le(out, text.size(), 4);
  put(out, text);
}

void put_int(Bytes& out, std::uint32_t value) {  // BININT
  put(out, "J");
  put_le(out, value, 4);
}

Bytes data_pickle(std::uint32_t elements) {
  Bytes p;
  put(p, "\x80\x02}");  // PROTO 2, EMPTY_DICT
  put_unicode(p, "w");
  put(p, "ctorch._utils\n_rebuild_tensor_v2\n((");
  put_unicode(p, "storage");
  put(p, "ctorch\nFloatStorage\n");
  put_unicode(p, "0");
  put_unicode(p, "cpu");
  put_int(p, elements);
  put(p, "tQ");  // TUPLE (the persistent id), BINPERSID
  put_int(p, 0);
  put_int(p, elements);
  put(p, "\x85");  // TUPLE1: size
  put_int(p, 1);
  put(p, "\x85\x89");  // TUPLE1: stride; NEWFALSE: requires_grad
  put(p, "ccollections\nOrderedDict\n)R");
  put(p, "tRs.");  // args tuple, REDUCE, SETITEM, STOP
  return p;
}

struct Record {
  std::string name;
  Bytes payload;
  std::uint64_t offset = 0;  // of its local header
};

}  // namespace

float float_checkpoint_value(std::size_t i) noexcept {
  return static_cast<float>(i % 4096);
}

void write_float_checkpoint(const std::filesystem::path& path, std::size_t elements) {
  Bytes values(elements * 4);
  for (std::size_t i = 0; i < elements; ++i) {
    const float v = float_checkpoint_value(i);
    std::uint32_t bits = 0;
    static_assert(sizeof bits == sizeof v);
    __builtin_memcpy(&bits, &v, 4);
    for (int b = 0; b < 4; ++b)
      values[i * 4 + b] = static_cast<std::byte>((bits >> (8 * b)) & 0xFF);
  }
  std::vector<Record> records;
  records.push_back({"archive/data.pkl", data_pickle(static_cast<std::uint32_t>(elements))});
  records.push_back({"archive/byteorder", {}});
  put(records.back().payload, "little");
  records.push_back({"archive/data/0", std::move(values)});
  records.push_back({"archive/version", {}});
  put(records.back().payload, "3\n");

  Bytes out;
  for (Record& r : records) {
    r.offset = out.size();
    // torch pads each payload to 64 bytes with a local extra field ("FB", 0x4246).
    const std::uint64_t header_end = out.size() + 30 + r.name.size() + 4;
    const std::uint64_t padding = (64 - header_end % 64) % 64;
    put_le(out, 0x04034b50, 4);
    put_le(out, 20, 2);  // version needed
    put_le(out, 0, 2);   // flags
    put_le(out, 0, 2);   // stored
    put_le(out, 0, 4);   // time, date
    put_le(out, zip::crc32_of(r.payload), 4);
    put_le(out, r.payload.size(), 4);
    put_le(out, r.payload.size(), 4);
    put_le(out, r.name.size(), 2);
    put_le(out, 4 + padding, 2);
    put(out, r.name);
    put_le(out, 0x4246, 2);
    put_le(out, padding, 2);
    out.resize(out.size() + padding);
    out.insert(out.end(), r.payload.begin(), r.payload.end());
  }
  const std::uint64_t directory = out.size();
  for (const Record& r : records) {
    put_le(out, 0x02014b50, 4);
    put_le(out, 20, 2);  // version made by
    put_le(out, 20, 2);  // version needed
    put_le(out, 0, 2);
    put_le(out, 0, 2);
    put_le(out, 0, 4);
    put_le(out, zip::crc32_of(r.payload), 4);
    put_le(out, r.payload.size(), 4);
    put_le(out, r.payload.size(), 4);
    put_le(out, r.name.size(), 2);
    put_le(out, 0, 2);  // extra
    put_le(out, 0, 2);  // comment
    put_le(out, 0, 2);  // disk
    put_le(out, 0, 2);  // internal attributes
    put_le(out, 0, 4);  // external attributes
    put_le(out, r.offset, 4);
    put(out, r.name);
  }
  const std::uint64_t directory_size = out.size() - directory;
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 4);  // disks
  put_le(out, records.size(), 2);
  put_le(out, records.size(), 2);
  put_le(out, directory_size, 4);
  put_le(out, directory, 4);
  put_le(out, 0, 2);

  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!file) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace pthload::faults
