// Legacy stream parsing: the stacked pickles, then the storage table (docs/format.md §5.1;
// torch/serialization.py _legacy_load, torch/csrc/serialization.cpp THPStorage_readFileRaw).
#include "legacy/stream.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <unordered_set>

#include "common/byte_reader.hpp"
#include "common/checked.hpp"
#include "pthload/error.hpp"

namespace pthload::legacy {
namespace {

using pickle::Kind;
using pickle::Value;

// MAGIC_NUMBER = 0x1950a86a20f9469cfc6c as pickle's minimal two's-complement little-endian bytes.
constexpr std::array<std::uint8_t, 10> kMagicBytes{0x6c, 0xfc, 0x9c, 0x46, 0xf9,
                                                   0x20, 0x6a, 0xa8, 0x50, 0x19};

bool is_magic_number(const Value& value) {
  if (!value.is(Kind::kBigInt)) return false;
  const auto bytes = value.as_bytes();
  return bytes.size() == kMagicBytes.size() &&
         std::memcmp(bytes.data(), kMagicBytes.data(), kMagicBytes.size()) == 0;
}

bool is_text(const Value& value) {
  return value.is(Kind::kString) || value.is(Kind::kPython2String);
}

// One of the stacked pickles, starting at `offset`; `what` names it in errors.
pickle::Result run_at(std::span<const std::byte> file, std::uint64_t offset, std::string_view what,
                      const Limits& limits, pickle::PersistentLoad persistent_load = {}) {
  if (offset >= file.size()) {
    throw FormatError(Errc::kLegacyTruncated,
                      fmt::format("legacy stream: the file ends before the {} pickle", what),
                      {.offset = offset});
  }
  pickle::Machine machine(limits);
  pickle::RunOptions options{.allow_trailing_bytes = true,
                             .base_offset = offset,
                             .persistent_load = std::move(persistent_load)};
  return machine.run(file.subspan(static_cast<std::size_t>(offset)), options);
}

// torch writes each key as str(storage._cdata); Python 2 files have byte strings, and a
// hand-written file may use ints, which torch's dict lookups would also accept.
std::string key_text(const Value& key, std::uint64_t offset) {
  if (is_text(key)) return std::string(key.as_string());
  if (key.is(Kind::kInt)) return std::to_string(key.as_int());
  throw FormatError(Errc::kLegacyBadKeyList,
                    fmt::format("legacy stream: a storage key is a {}, not a string",
                                pickle::kind_name(key.kind())),
                    {.offset = offset});
}

std::optional<bool> little_endian_flag(const Value& sys_info) {
  for (const auto& [key, value] : sys_info.dict_items()) {
    if (is_text(*key) && key->as_string() == "little_endian" && value->is(Kind::kBool)) {
      return value->as_bool();
    }
  }
  return std::nullopt;
}

}  // namespace

Stream Stream::parse(std::span<const std::byte> file, const Limits& limits,
                     pickle::PersistentLoad persistent_load) {
  Stream stream(file);
  std::uint64_t offset = 0;

  const auto magic = run_at(file, offset, "magic number", limits);
  if (!is_magic_number(*magic.root)) {
    throw FormatError(Errc::kLegacyBadMagic,
                      "legacy stream: invalid magic number (not 0x1950a86a20f9469cfc6c); corrupt "
                      "file?",
                      {.offset = offset});
  }
  offset += magic.end_offset;

  const auto protocol = run_at(file, offset, "protocol version", limits);
  if (!protocol.root->is(Kind::kInt) || protocol.root->as_int() != kProtocolVersion) {
    throw FormatError(Errc::kLegacyBadProtocol,
                      protocol.root->is(Kind::kInt)
                          ? fmt::format("legacy stream: invalid protocol version {} (expected {})",
                                        protocol.root->as_int(), kProtocolVersion)
                          : fmt::format("legacy stream: the protocol version is a {}, not an int",
                                        pickle::kind_name(protocol.root->kind())),
                      {.offset = offset});
  }
  offset += protocol.end_offset;

  // torch.load unpickles sys_info and ignores it. Its byte order flag does not matter either:
  // THPStorage_writeFileRaw converts to little-endian on big-endian hosts, so the data section
  // is little-endian in every file (docs/format.md §5.1, §6); type_sizes describe C types the
  // format never uses (counts are int64).
  const auto sys_info = run_at(file, offset, "sys_info", limits);
  if (!sys_info.root->is(Kind::kDict)) {
    throw FormatError(Errc::kLegacyBadSysInfo,
                      fmt::format("legacy stream: sys_info is a {}, not a dict",
                                  pickle::kind_name(sys_info.root->kind())),
                      {.offset = offset});
  }
  stream.little_endian_ = little_endian_flag(*sys_info.root);
  offset += sys_info.end_offset;

  stream.main_ = run_at(file, offset, "main", limits, std::move(persistent_load));
  stream.main_range_ = {.offset = offset, .size = stream.main_.end_offset};
  offset += stream.main_.end_offset;

  const auto keys = run_at(file, offset, "storage key list", limits);
  if (!keys.root->is(Kind::kList) && !keys.root->is(Kind::kTuple)) {
    throw FormatError(Errc::kLegacyBadKeyList,
                      fmt::format("legacy stream: the storage key list is a {}, not a list",
                                  pickle::kind_name(keys.root->kind())),
                      {.offset = offset});
  }
  std::unordered_set<std::string_view> seen;
  stream.keys_.reserve(keys.root->items().size());
  for (const Value* key : keys.root->items()) {
    stream.keys_.push_back(key_text(*key, offset));
  }
  for (const auto& key : stream.keys_) {
    // torch would read a repeated key's data twice into one storage: no writer does that.
    if (!seen.insert(key).second) {
      throw FormatError(Errc::kLegacyBadKeyList,
                        fmt::format("legacy stream: storage key '{}' is listed twice", key),
                        {.offset = offset});
    }
  }
  offset += keys.end_offset;
  stream.data_offset_ = offset;
  return stream;
}

std::vector<StorageData> Stream::storage_data(std::span<const std::size_t> element_sizes) const {
  if (element_sizes.size() != keys_.size()) {
    throw FormatError(Errc::kLegacyKeyMismatch,
                      fmt::format("legacy stream: {} element sizes for {} storage keys",
                                  element_sizes.size(), keys_.size()));
  }
  std::vector<StorageData> result;
  result.reserve(keys_.size());
  const std::uint64_t file_size = file_.size();
  std::uint64_t offset = data_offset_;
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (!common::fits(offset, 8, file_size)) {
      throw FormatError(Errc::kLegacyTruncated,
                        fmt::format("legacy stream: the file ends before the element count of "
                                    "storage '{}'",
                                    keys_[i]),
                        {.offset = offset});
    }
    const auto count = common::load_le<std::uint64_t>(file_.data() + offset);
    const std::uint64_t data = offset + 8;
    // The count is read as int64 by torch; a negative one, read unsigned, fails the bounds
    // check like any other count too large for the file.
    const auto nbytes = common::checked_mul(count, element_sizes[i]);
    if (!nbytes || !common::fits(data, *nbytes, file_size)) {
      throw FormatError(
          Errc::kLegacyStorageOutOfBounds,
          fmt::format("legacy stream: storage '{}' has {} elements of {} bytes, more than the "
                      "{} bytes left in the file",
                      keys_[i], static_cast<std::int64_t>(count), element_sizes[i],
                      file_size - data),
          {.offset = offset});
    }
    result.push_back({.count_offset = offset, .count = count, .bytes = {data, *nbytes}});
    offset = data + *nbytes;
  }
  return result;
}

}  // namespace pthload::legacy
