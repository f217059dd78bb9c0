// ShortText: an owned string of 16 bytes, the text itself when it is short. A storage's key and
// location ("12345", "cpu") are short, and a checkpoint of 100 000 tensors keeps 100 000 of each:
// as std::string (32 bytes) they were a third of every storage's state, which the load fills
// and walks.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace pthload::common {

/// Up to 15 bytes are kept inline; longer text in a block this object owns (allocated and freed
/// with std::allocator). Copyable and movable; a moved-from ShortText is empty.
class ShortText {
 public:
  ShortText() noexcept { set_inline_size(0); }
  explicit(false) ShortText(std::string_view text) { assign(text); }
  ShortText(const ShortText& other) : ShortText(other.view()) {}
  ShortText(ShortText&& other) noexcept {
    std::memcpy(bytes_, other.bytes_, sizeof(bytes_));
    other.set_inline_size(0);
  }
  ShortText& operator=(const ShortText& other) {
    if (this != &other) *this = other.view();
    return *this;
  }
  ShortText& operator=(ShortText&& other) noexcept {
    if (this != &other) {
      release();
      std::memcpy(bytes_, other.bytes_, sizeof(bytes_));
      other.set_inline_size(0);
    }
    return *this;
  }
  /// Throws std::bad_alloc for text longer than 15 bytes when no memory is left, and
  /// std::length_error for text of 4 GiB or more (this then holds what it held before).
  ShortText& operator=(std::string_view text) {
    ShortText replacement(text);
    *this = std::move(replacement);
    return *this;
  }
  ~ShortText() { release(); }

  [[nodiscard]] std::string_view view() const noexcept {
    if (!on_heap()) return {reinterpret_cast<const char*>(bytes_), inline_size()};
    return {heap_data(), heap_size()};
  }
  explicit(false) operator std::string_view() const noexcept { return view(); }
  [[nodiscard]] std::size_t size() const noexcept { return view().size(); }
  [[nodiscard]] bool empty() const noexcept { return view().empty(); }

  friend bool operator==(const ShortText& a, const ShortText& b) noexcept {
    return a.view() == b.view();
  }
  friend bool operator==(const ShortText& a, std::string_view b) noexcept { return a.view() == b; }

 private:
  static constexpr std::size_t kInline = 15;
  // The last byte: the inline size, or kOnHeap (the first 8 bytes then point at the text, the
  // next 4 hold its size: a key or location of 4 GiB is refused, by the pickle's limits first).
  static constexpr unsigned char kOnHeap = 0xFF;
  static constexpr std::size_t kTag = 15;

  void assign(std::string_view text) {
    if (text.size() <= kInline) {
      std::memcpy(bytes_, text.data(), text.size());
      set_inline_size(text.size());
      return;
    }
    if (text.size() > UINT32_MAX) throw std::length_error("text of 4 GiB or more");
    const auto size = static_cast<std::uint32_t>(text.size());
    char* data = std::allocator<char>{}.allocate(size);
    std::memcpy(data, text.data(), size);
    std::memcpy(bytes_, &data, sizeof(data));
    std::memcpy(bytes_ + sizeof(data), &size, sizeof(size));
    bytes_[kTag] = kOnHeap;
  }
  void release() noexcept {
    if (on_heap()) std::allocator<char>{}.deallocate(heap_data(), heap_size());
    set_inline_size(0);
  }
  [[nodiscard]] bool on_heap() const noexcept { return bytes_[kTag] == kOnHeap; }
  [[nodiscard]] std::size_t inline_size() const noexcept { return bytes_[kTag]; }
  void set_inline_size(std::size_t size) noexcept {
    bytes_[kTag] = static_cast<unsigned char>(size);
  }
  [[nodiscard]] char* heap_data() const noexcept {
    char* data = nullptr;
    std::memcpy(&data, bytes_, sizeof(data));
    return data;
  }
  [[nodiscard]] std::uint32_t heap_size() const noexcept {
    std::uint32_t size = 0;
    std::memcpy(&size, bytes_ + sizeof(char*), sizeof(size));
    return size;
  }

  alignas(8) unsigned char bytes_[16] = {};
};

}  // namespace pthload::common

/// Formats as its text.
template <>
struct fmt::formatter<pthload::common::ShortText> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const pthload::common::ShortText& text, FormatContext& context) const {
    return fmt::formatter<std::string_view>::format(text.view(), context);
  }
};
