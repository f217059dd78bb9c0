// Test helper: safetensors files from a header's JSON text and the data bytes, laid out as
// safetensors' serialize() writes them (size as little-endian u64, header, data), so each test
// can write one malformed header.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pthload::test::safetensors_build {

/// The file: 8 size bytes (`size_field`, or the header's length), the header, then `data`.
inline std::vector<std::byte> file(std::string_view header, std::string_view data = {},
                                   std::optional<std::uint64_t> size_field = std::nullopt) {
  const std::uint64_t size = size_field.value_or(header.size());
  std::vector<std::byte> out(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<std::byte>((size >> (8 * i)) & 0xff);
  // std::copy, not memcpy: an empty string_view's data() may be null, which memcpy forbids.
  std::copy(header.begin(), header.end(), reinterpret_cast<char*>(out.data()) + 8);
  std::copy(data.begin(), data.end(), reinterpret_cast<char*>(out.data()) + 8 + header.size());
  return out;
}

/// One tensor's header member: "name":{"dtype":...,"shape":...,"data_offsets":[begin,end]}.
inline std::string tensor(std::string_view name, std::string_view dtype, std::string_view shape,
                          std::uint64_t begin, std::uint64_t end) {
  return "\"" + std::string(name) + "\":{\"dtype\":\"" + std::string(dtype) +
         "\",\"shape\":" + std::string(shape) + ",\"data_offsets\":[" + std::to_string(begin) +
         "," + std::to_string(end) + "]}";
}

}  // namespace pthload::test::safetensors_build
