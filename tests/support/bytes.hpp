// Test helper: bytes from text and text from bytes, and float32 values as a record's bytes.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pthload::test {

/// The bytes of `text`, one per char.
[[nodiscard]] inline std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out(text.size());
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  return out;
}

/// The text of `bytes`, one char per byte.
[[nodiscard]] inline std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// `count` little-endian float32 values first, first + 1, first + 2, ... as a record's bytes
/// (exact while they stay below 2^24).
[[nodiscard]] inline std::string float_record(int count, float first = 0) {
  std::string bytes;
  for (int i = 0; i < count; ++i) {
    const float value = first + static_cast<float>(i);
    bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  return bytes;
}

}  // namespace pthload::test
