// `pthbench once read-index FILE`: the least a load of a torch.save zip can do, for the
// comparison's ceilings (tools/bench_compare.py). It reads what every reader of the format must
// read, as pthload reads it: the end records, the central directory and data.pkl with pread into
// fresh memory, every record's local header through one reused 2 MiB window. It parses each
// central directory header into a 48-byte entry, walks the pickle's opcodes once without making
// a value, and writes one 64-byte record per persistent id (a storage reference). No value tree,
// no names, no storages, no checks beyond staying inside the bytes read: a reader that reads the
// file this way (never through the mapping, so that a file that shrinks gives an error, not
// SIGBUS) and gives its caller tensors does all of this and more, so its load of a many-tensor
// file cannot beat this.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench.hpp"
#include "common/byte_reader.hpp"
#include "zip/signatures.hpp"

namespace pthbench {
namespace {

// The zip layer's sizes and signatures and its little-endian loads: names and inline reads, none
// of the reader's work, so the floor stays a floor.
using pthload::common::load_le;
using pthload::zip::kCentralHeaderSignature;
using pthload::zip::kCentralHeaderSize;
using pthload::zip::kEndRecordSignature;
using pthload::zip::kEndRecordSize;
using pthload::zip::kLocalHeaderSize;
using pthload::zip::kMaxCommentSize;
using pthload::zip::kSaturated32;
using pthload::zip::kZip64EndRecordMinSize;
using pthload::zip::kZip64EndRecordSignature;
using pthload::zip::kZip64ExtraId;
using pthload::zip::kZip64LocatorSignature;
using pthload::zip::kZip64LocatorSize;

constexpr std::uint64_t kTailBytes = kMaxCommentSize + kEndRecordSize;
constexpr std::size_t kWindowBytes = std::size_t{2} << 20;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("read-index: " + what);
}

class File {
 public:
  explicit File(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) fail("cannot open " + path);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() { ::close(fd_); }
  [[nodiscard]] std::uint64_t size() const {
    const off_t end = ::lseek(fd_, 0, SEEK_END);
    if (end < 0) fail("cannot seek");
    return static_cast<std::uint64_t>(end);
  }
  // Up to `size` bytes at `offset`; returns how many (short only at the end of the file).
  std::size_t read(std::byte* into, std::size_t size, std::uint64_t offset) {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t got = ::pread(fd_, into + done, size - done, static_cast<off_t>(offset + done));
      if (got <= 0) break;
      done += static_cast<std::size_t>(got);
    }
    bytes_read += done;
    return done;
  }
  std::uint64_t bytes_read = 0;

 private:
  int fd_;
};

struct Entry {
  std::string_view name;
  std::uint64_t local_header_offset;
  std::uint64_t data_offset;
  std::uint64_t size;
  std::uint16_t method;
};

struct StorageReference {
  std::uint64_t words[8];
};

struct Directory {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t count = 0;
};

Directory find_directory(File& file, std::uint64_t file_size) {
  const std::size_t tail_size =
      static_cast<std::size_t>(std::min<std::uint64_t>(file_size, kTailBytes));
  std::vector<std::byte> tail(tail_size);
  if (file.read(tail.data(), tail_size, file_size - tail_size) != tail_size) fail("short read");
  for (std::size_t at = tail_size >= kEndRecordSize ? tail_size - kEndRecordSize + 1 : 0;
       at-- > 0;) {
    if (load_le<std::uint32_t>(&tail[at]) != kEndRecordSignature) continue;
    Directory directory{.offset = load_le<std::uint32_t>(&tail[at + 16]),
                        .size = load_le<std::uint32_t>(&tail[at + 12]),
                        .count = load_le<std::uint16_t>(&tail[at + 10])};
    // The zip64 locator just before, and the zip64 end record it points to.
    if (at >= kZip64LocatorSize &&
        load_le<std::uint32_t>(&tail[at - kZip64LocatorSize]) == kZip64LocatorSignature) {
      std::byte record[kZip64EndRecordMinSize];
      const auto record_offset = load_le<std::uint64_t>(&tail[at - kZip64LocatorSize + 8]);
      if (file.read(record, sizeof record, record_offset) != sizeof record ||
          load_le<std::uint32_t>(record) != kZip64EndRecordSignature) {
        fail("bad zip64 end record");
      }
      directory = {.offset = load_le<std::uint64_t>(record + 48),
                   .size = load_le<std::uint64_t>(record + 40),
                   .count = load_le<std::uint64_t>(record + 32)};
    }
    if (directory.offset > file_size || directory.size > file_size - directory.offset) {
      fail("central directory outside the file");
    }
    return directory;
  }
  fail("not a zip file (no end record)");
}

// Past 4 GiB, torch's writer saturates a header's size and offset fields and puts the values in
// a zip64 extra field (id 1), in the order uncompressed size, compressed size, offset: only
// those saturated are there.
void resolve_zip64(Entry& entry, const std::byte* header, std::span<const std::byte> extra) {
  const bool size_saturated = load_le<std::uint32_t>(header + 24) == kSaturated32;
  const bool compressed_saturated = load_le<std::uint32_t>(header + 20) == kSaturated32;
  const bool offset_saturated = load_le<std::uint32_t>(header + 42) == kSaturated32;
  if (!size_saturated && !compressed_saturated && !offset_saturated) return;
  for (std::size_t at = 0; at + 4 <= extra.size();) {
    const std::size_t field_size = load_le<std::uint16_t>(&extra[at + 2]);
    if (field_size > extra.size() - at - 4) break;
    if (load_le<std::uint16_t>(&extra[at]) == kZip64ExtraId) {
      std::size_t next = at + 4;
      const auto take = [&]() -> std::uint64_t {
        if (next + 8 > at + 4 + field_size) fail("zip64 extra field too short");
        next += 8;
        return load_le<std::uint64_t>(&extra[next - 8]);
      };
      if (size_saturated) entry.size = take();
      if (compressed_saturated) (void)take();
      if (offset_saturated) entry.local_header_offset = take();
      return;
    }
    at += 4 + field_size;
  }
  fail("saturated size or offset without a zip64 extra field");
}

// The entries, and the directory's bytes their names view (as pthload's image keeps them).
struct Index {
  std::unique_ptr<std::byte[]> directory;
  std::vector<Entry> entries;
};

Index read_index(File& file, const Directory& directory) {
  Index index{.directory = std::make_unique_for_overwrite<std::byte[]>(directory.size)};
  const std::byte* bytes = index.directory.get();
  if (file.read(index.directory.get(), directory.size, directory.offset) != directory.size) {
    fail("short central directory");
  }
  std::vector<Entry>& entries = index.entries;
  entries.reserve(std::min(directory.count, directory.size / kCentralHeaderSize));
  for (std::size_t at = 0; at + kCentralHeaderSize <= directory.size;) {
    const std::byte* header = bytes + at;
    if (load_le<std::uint32_t>(header) != kCentralHeaderSignature) fail("bad central header");
    const std::size_t name_size = load_le<std::uint16_t>(header + 28);
    const std::size_t extra_size = load_le<std::uint16_t>(header + 30);
    const std::size_t size =
        kCentralHeaderSize + name_size + extra_size + load_le<std::uint16_t>(header + 32);
    if (size > directory.size - at) fail("central header past the directory");
    const std::byte* name = header + kCentralHeaderSize;
    Entry entry{.name = {reinterpret_cast<const char*>(name), name_size},
                .local_header_offset = load_le<std::uint32_t>(header + 42),
                .data_offset = 0,
                .size = load_le<std::uint32_t>(header + 24),
                .method = load_le<std::uint16_t>(header + 10)};
    resolve_zip64(entry, header, {name + name_size, extra_size});
    entries.push_back(entry);
    at += size;
  }
  // Every local header through one reused window, as pthload resolves records: headers less than
  // 64 KiB apart are read together (up to 2 MiB a read), a lone one with 4 KiB after it.
  constexpr std::uint64_t kMergeGap = 64 * 1024;
  constexpr std::uint64_t kHeaderSlack = 4096;
  std::vector<std::uint64_t> run_end(entries.size());
  for (std::size_t i = entries.size(); i-- > 0;) {
    const std::uint64_t offset = entries[i].local_header_offset;
    const bool joins_next = i + 1 < entries.size() &&
                            entries[i + 1].local_header_offset >= offset &&
                            entries[i + 1].local_header_offset - offset <= kMergeGap;
    run_end[i] = joins_next ? run_end[i + 1] : offset + kHeaderSlack;
  }
  const auto window = std::make_unique_for_overwrite<std::byte[]>(kWindowBytes);
  std::uint64_t window_offset = 0;
  std::size_t window_size = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::uint64_t at = entries[i].local_header_offset;
    if (at < window_offset || at + kLocalHeaderSize > window_offset + window_size) {
      window_offset = at;
      const std::uint64_t wanted =
          std::clamp<std::uint64_t>(run_end[i] - at, kLocalHeaderSize, kWindowBytes);
      window_size = file.read(window.get(), static_cast<std::size_t>(wanted), at);
      if (window_size < kLocalHeaderSize) fail("local header past the end of the file");
    }
    const std::byte* header = window.get() + (at - window_offset);
    entries[i].data_offset = at + kLocalHeaderSize + load_le<std::uint16_t>(header + 26) +
                             load_le<std::uint16_t>(header + 28);
  }
  return index;
}

// The bytes of each opcode's argument; kLine: up to a newline, kTwoLines: two of them; kSized1/4/8:
// a length of that many bytes, then that many.
enum : std::uint8_t { kNone = 0, kLine = 100, kTwoLines, kSized1, kSized4, kSized8, kUnknown };

struct OpcodeTable {
  std::uint8_t argument[256];
  constexpr OpcodeTable() : argument() {
    for (auto& a : argument)
      a = kUnknown;
    set("(.012NRQabde}lost)u]\x85\x86\x87\x88\x89\x81\x8f\x90\x91\x92\x93\x94\x97\x98", kNone);
    set("FILSVgpP", kLine);
    set("ci", kTwoLines);
    set("Khq\x80\x82", 1);
    set("M\x83", 2);
    set("Jjr\x84", 4);
    set("G\x95", 8);  // FRAME: its length is not needed to walk the opcodes inside
    set("UC\x8c\x8a", kSized1);
    set("TXB\x8b", kSized4);
    set("\x8d\x8e\x96", kSized8);
  }
  constexpr void set(std::string_view opcodes, std::uint8_t value) {
    for (const char op : opcodes)
      argument[static_cast<std::uint8_t>(op)] = value;
  }
};
constexpr OpcodeTable kOpcodes;

// The end of the argument of opcode `op`, which starts at `at`; nullptr where it would run past
// `end`, or where `op` is no opcode.
const std::byte* argument_end(std::uint8_t op, const std::byte* at, const std::byte* end) {
  const auto left = static_cast<std::uint64_t>(end - at);
  const auto sized = [&](std::uint64_t length_bytes, std::uint64_t length) -> const std::byte* {
    return length <= left - length_bytes ? at + length_bytes + length : nullptr;
  };
  switch (const std::uint8_t argument = kOpcodes.argument[op]) {
    case kLine: {
      const void* newline = std::memchr(at, '\n', left);
      return newline != nullptr ? static_cast<const std::byte*>(newline) + 1 : nullptr;
    }
    case kTwoLines: {
      const std::byte* first = argument_end('g', at, end);
      return first != nullptr ? argument_end('g', first, end) : nullptr;
    }
    case kSized1:
      return left >= 1 ? sized(1, static_cast<std::uint8_t>(*at)) : nullptr;
    case kSized4:
      return left >= 4 ? sized(4, load_le<std::uint32_t>(at)) : nullptr;
    case kSized8:
      return left >= 8 ? sized(8, load_le<std::uint64_t>(at)) : nullptr;
    case kUnknown:
      return nullptr;
    default:
      return argument <= left ? at + argument : nullptr;
  }
}

// The records of the persistent ids: one each, in room for one per zip entry (what the file paid
// for), the oldest overwritten beyond that, so that a pickle of a million BINPERSIDs and a few
// records does not make a million records.
class StorageReferences {
 public:
  explicit StorageReferences(std::size_t capacity) { records_.reserve(capacity); }
  void add(std::uint64_t pickle_offset) {
    const StorageReference record{{count_++, pickle_offset}};
    if (records_.size() < records_.capacity()) {
      records_.push_back(record);
    } else if (!records_.empty()) {
      records_[count_ % records_.size()] = record;
    }
  }

 private:
  std::vector<StorageReference> records_;
  std::uint64_t count_ = 0;
};

// Walks the opcodes to STOP; one record per persistent id. The opcodes of a torch.save pickle
// have cases of their own, the rest go through the table.
void walk_pickle(std::span<const std::byte> pickle, StorageReferences& made) {
  const std::byte* at = pickle.data();
  const std::byte* const end = at + pickle.size();
  while (at < end) {
    const auto op = static_cast<std::uint8_t>(*at++);
    const auto left = static_cast<std::size_t>(end - at);
    switch (op) {
      case 'q':
      case 'h':
      case 'K':  // BINPUT BINGET BININT1
        if (left < 1) fail("opcode argument past the pickle");
        at += 1;
        continue;
      case 'X': {  // BINUNICODE
        if (left < 4 || load_le<std::uint32_t>(at) > left - 4) fail("string past the pickle");
        at += 4 + load_le<std::uint32_t>(at);
        continue;
      }
      case '(':
      case ')':
      case 't':
      case 0x85:
      case 0x86:
      case 0x87:
      case 'R':
      case 0x89:
      case 'u':
      case '}':
        continue;
      case 'Q':  // BINPERSID
        made.add(static_cast<std::uint64_t>(at - pickle.data()));
        continue;
      case '.':
        return;
      default: {
        if (op == 'P') {
          made.add(static_cast<std::uint64_t>(at - pickle.data()));
        }
        at = argument_end(op, at, end);
        if (at == nullptr) fail("unknown opcode, or an argument past the pickle");
      }
    }
  }
  fail("no STOP");
}

}  // namespace

std::uint64_t read_index_floor(const std::string& path) {
  File file(path);
  const std::uint64_t file_size = file.size();
  const Directory directory = find_directory(file, file_size);
  const Index index = read_index(file, directory);
  const std::vector<Entry>& entries = index.entries;
  const auto pickle_entry = std::find_if(entries.begin(), entries.end(), [](const Entry& e) {
    return e.name.size() >= 9 && e.name.substr(e.name.size() - 9) == "/data.pkl";
  });
  if (pickle_entry == entries.end()) fail("no data.pkl record");
  if (pickle_entry->method != 0) fail("data.pkl is compressed");
  const std::size_t pickle_size = pickle_entry->size;
  if (pickle_entry->data_offset > file_size ||
      pickle_size > file_size - pickle_entry->data_offset) {
    fail("data.pkl past the end of the file");
  }
  const auto pickle = std::make_unique_for_overwrite<std::byte[]>(pickle_size);
  if (file.read(pickle.get(), pickle_size, pickle_entry->data_offset) != pickle_size) {
    fail("short data.pkl");
  }
  StorageReferences made(entries.size());
  walk_pickle({pickle.get(), pickle_size}, made);
  return file.bytes_read;
}

}  // namespace pthbench
