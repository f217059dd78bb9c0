// Bounds-checked little- and big-endian reads from a borrowed byte span.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include <fmt/format.h>

#include "common/checked.hpp"
#include "pthload/error.hpp"

namespace pthload::common {

/// Reverses the bytes of an unsigned integer (std::byteswap is C++23).
template <typename T>
[[nodiscard]] constexpr T byteswap(T value) noexcept {
  if constexpr (sizeof(T) == 1) {
    return value;
  } else if constexpr (sizeof(T) == 2) {
    return static_cast<T>(__builtin_bswap16(static_cast<std::uint16_t>(value)));
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<T>(__builtin_bswap32(static_cast<std::uint32_t>(value)));
  } else {
    static_assert(sizeof(T) == 8);
    return static_cast<T>(__builtin_bswap64(static_cast<std::uint64_t>(value)));
  }
}

/// Loads an unsigned little-endian integer of sizeof(T) bytes from `p` (no bounds check).
template <typename T>
[[nodiscard]] inline T load_le(const std::byte* p) noexcept {
  T value;
  std::memcpy(&value, p, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) value = byteswap(value);
  return value;
}

/// Loads an unsigned big-endian integer of sizeof(T) bytes from `p` (no bounds check).
template <typename T>
[[nodiscard]] inline T load_be(const std::byte* p) noexcept {
  T value;
  std::memcpy(&value, p, sizeof(T));
  if constexpr (std::endian::native == std::endian::little) value = byteswap(value);
  return value;
}

/// A cursor over borrowed bytes. Every read checks the bounds and throws
/// FormatError(truncated_code) naming the offset and what was being read; offsets reported are
/// `base_offset` + the position, so a reader over a slice still reports file offsets.
class ByteReader {
 public:
  ByteReader(std::span<const std::byte> bytes, Errc truncated_code,
             std::uint64_t base_offset = 0) noexcept
      : bytes_(bytes), truncated_code_(truncated_code), base_offset_(base_offset) {}

  [[nodiscard]] std::size_t position() const noexcept { return position_; }
  [[nodiscard]] std::size_t remaining() const noexcept { return bytes_.size() - position_; }
  [[nodiscard]] std::uint64_t file_offset() const noexcept { return base_offset_ + position_; }

  /// Moves to `position`; throws when it lies past the end.
  void seek(std::size_t position, std::string_view what) {
    if (position > bytes_.size()) fail(what, position - position_);
    position_ = position;
  }
  void skip(std::size_t count, std::string_view what) { (void)bytes(count, what); }

  /// The next `count` bytes, as a view into the borrowed span.
  [[nodiscard]] std::span<const std::byte> bytes(std::size_t count, std::string_view what) {
    if (count > remaining()) fail(what, count);
    const auto view = bytes_.subspan(position_, count);
    position_ += count;
    return view;
  }

  template <typename T>
  [[nodiscard]] T le(std::string_view what) {
    return load_le<T>(bytes(sizeof(T), what).data());
  }
  template <typename T>
  [[nodiscard]] T be(std::string_view what) {
    return load_be<T>(bytes(sizeof(T), what).data());
  }

 private:
  [[noreturn]] void fail(std::string_view what, std::size_t wanted) const {
    throw FormatError(
        truncated_code_,
        fmt::format("truncated: {} needs {} bytes, {} remain", what, wanted, remaining()),
        {.offset = base_offset_ + position_});
  }

  std::span<const std::byte> bytes_;
  std::size_t position_ = 0;
  Errc truncated_code_;
  std::uint64_t base_offset_;
};

}  // namespace pthload::common
