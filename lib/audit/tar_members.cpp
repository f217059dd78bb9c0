// Tar headers as CPython's Lib/tarfile.py reads them (TarInfo.frombuf, _proc_gnulong,
// _proc_pax): 512-byte blocks, octal or base-256 numbers, a checksum over the header with its
// own field as spaces, ustar's prefix, GNU long names ('L') and PAX extended headers ('x').
#include "audit/tar_members.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace pthload::audit {
namespace {

constexpr std::size_t kBlock = 512;

std::string_view field(std::span<const std::byte> header, std::size_t at, std::size_t size) {
  const auto* text = reinterpret_cast<const char*>(header.data() + at);
  const auto* nul = static_cast<const char*>(std::memchr(text, '\0', size));
  return {text, nul == nullptr ? size : static_cast<std::size_t>(nul - text)};
}

// tarfile.nti: base-256 when the first byte is 0x80 or 0xff, else octal digits (spaces and NULs
// around them ignored). nullopt where tarfile raises InvalidHeaderError.
std::optional<std::uint64_t> number(std::span<const std::byte> header, std::size_t at,
                                    std::size_t size) {
  const auto first = std::to_integer<unsigned>(header[at]);
  if (first == 0x80 || first == 0xff) {
    if (first == 0xff) return std::nullopt;  // negative: no size or checksum is
    std::uint64_t value = 0;
    for (std::size_t i = 1; i < size; ++i) {
      if (value > (UINT64_MAX >> 8)) return std::nullopt;
      value = (value << 8) | std::to_integer<std::uint64_t>(header[at + i]);
    }
    return value;
  }
  std::string_view text = field(header, at, size);
  while (!text.empty() && (text.front() == ' '))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' '))
    text.remove_suffix(1);
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '7' || value > (UINT64_MAX >> 3)) return std::nullopt;
    value = value * 8 + static_cast<std::uint64_t>(c - '0');
  }
  return value;
}

bool checksum_matches(std::span<const std::byte> header) {
  const auto stored = number(header, 148, 8);
  if (!stored) return false;
  std::int64_t unsigned_sum = 256;  // the checksum field counts as eight spaces
  std::int64_t signed_sum = 256;
  for (std::size_t i = 0; i < kBlock; ++i) {
    if (i >= 148 && i < 156) continue;
    const auto byte = std::to_integer<unsigned char>(header[i]);
    unsigned_sum += byte;
    signed_sum += static_cast<signed char>(byte);
  }
  return static_cast<std::int64_t>(*stored) == unsigned_sum ||
         static_cast<std::int64_t>(*stored) == signed_sum;
}

bool all_zero(std::span<const std::byte> block) {
  return std::all_of(block.begin(), block.end(), [](std::byte b) { return b == std::byte{0}; });
}

std::uint64_t padded(std::uint64_t size) {
  return (size + kBlock - 1) / kBlock * kBlock;
}

// The `path` record of a PAX header's data ("<length> path=<name>\n" records), if any.
std::optional<std::string> pax_path(std::span<const std::byte> data) {
  const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  std::optional<std::string> path;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t space = text.find(' ', at);
    if (space == std::string_view::npos) break;
    std::size_t length = 0;
    for (std::size_t i = at; i < space; ++i) {
      if (text[i] < '0' || text[i] > '9' || length > text.size()) return path;
      length = length * 10 + static_cast<std::size_t>(text[i] - '0');
    }
    if (length == 0 || length > text.size() - at) break;
    const std::string_view record = text.substr(space + 1, at + length - space - 1);
    if (record.starts_with("path=")) {
      std::string_view value = record.substr(5);
      if (value.ends_with('\n')) value.remove_suffix(1);
      path = std::string(value);
    }
    at += length;
  }
  return path;
}

}  // namespace

bool looks_like_tar(std::span<const std::byte> file) noexcept {
  return file.size() >= kBlock && !all_zero(file.first(kBlock)) &&
         checksum_matches(file.first(kBlock));
}

std::optional<std::vector<TarMember>> read_tar_members(std::span<const std::byte> file,
                                                       std::string& problem) {
  if (!looks_like_tar(file)) return std::nullopt;
  std::vector<TarMember> members;
  std::optional<std::string> next_name;  // from a GNU long name or a PAX header
  std::uint64_t at = 0;
  while (at <= file.size() && file.size() - at >= kBlock) {
    const auto header = file.subspan(static_cast<std::size_t>(at), kBlock);
    if (all_zero(header)) break;  // the end-of-archive block
    if (!checksum_matches(header)) {
      problem = fmt::format("tar header at byte {} has a bad checksum", at);
      break;
    }
    const auto size = number(header, 124, 12);
    if (!size) {
      problem = fmt::format("tar header at byte {} has an invalid size", at);
      break;
    }
    const std::uint64_t data_at = at + kBlock;
    if (*size > file.size() - data_at) {
      problem = fmt::format("tar member at byte {} claims {} bytes past the end", at, *size);
      break;
    }
    const auto data =
        file.subspan(static_cast<std::size_t>(data_at), static_cast<std::size_t>(*size));
    const char type = std::to_integer<char>(header[156]);
    if (type == 'L') {
      std::string_view name(reinterpret_cast<const char*>(data.data()), data.size());
      if (const auto nul = name.find('\0'); nul != std::string_view::npos)
        name = name.substr(0, nul);
      next_name = std::string(name);
    } else if (type == 'x') {
      if (auto path = pax_path(data)) next_name = std::move(path);
    } else if (type != 'g' && type != 'K') {
      std::string name(field(header, 0, 100));
      if (field(header, 257, 5) == "ustar") {
        const auto prefix = field(header, 345, 155);
        if (!prefix.empty()) name = fmt::format("{}/{}", prefix, name);
      }
      if (next_name) name = std::move(*next_name);
      next_name.reset();
      members.push_back({std::move(name), data_at, *size, type});
    }
    at = data_at + padded(*size);
  }
  return members;
}

}  // namespace pthload::audit
