// Test helper: writes legacy (pre-1.6) torch.save streams piece by piece, as _legacy_save lays
// them out (docs/format.md §5.1), so tests can build well-formed and hostile ones.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "support/pickle_writer.hpp"

namespace pthload::test::legacy_build {

struct View {
  std::string key;
  std::int64_t offset;
  std::int64_t numel;
};

/// The pickle of MAGIC_NUMBER (LONG1, ten bytes).
inline std::string magic(bool correct = true) {
  PickleWriter p;
  p.raw("\x8a\x0a");
  p.raw(correct ? std::string_view("\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10)
                : std::string_view("\x6d\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10));
  return p.stop().bytes();
}

inline std::string protocol(std::int64_t version = 1001) {
  return PickleWriter().integer(version).stop().bytes();
}

inline std::string sys_info() {
  PickleWriter p;
  p.empty_dict().mark().str("protocol_version").integer(1001).str("little_endian").boolean(true);
  p.str("type_sizes").empty_dict().mark().str("short").integer(2).str("int").integer(4);
  p.str("long").integer(8).setitems();
  return p.setitems().stop().bytes();
}

/// ('storage', torch.<type>, key, 'cpu', numel, view_metadata) as BINPERSID.
inline PickleWriter& storage(PickleWriter& p, std::string_view type, std::string_view key,
                             std::int64_t numel, const std::optional<View>& view = std::nullopt) {
  p.mark().str("storage").global("torch", type).str(key).str("cpu").integer(numel);
  if (view) {
    p.mark().str(view->key).integer(view->offset).integer(view->numel).tuple();
  } else {
    p.none();
  }
  return p.tuple().binpersid();
}

/// _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()).
inline PickleWriter& tensor(PickleWriter& p, std::string_view type, std::string_view key,
                            std::int64_t numel, std::int64_t offset,
                            std::initializer_list<std::int64_t> sizes,
                            std::initializer_list<std::int64_t> strides,
                            const std::optional<View>& view = std::nullopt) {
  p.global("torch._utils", "_rebuild_tensor_v2").mark();
  storage(p, type, key, numel, view).integer(offset).ints(sizes).ints(strides).boolean(false);
  p.global("collections", "OrderedDict").empty_tuple().reduce();
  return p.tuple().reduce();
}

inline std::string key_list(std::initializer_list<std::string_view> keys) {
  PickleWriter p;
  p.empty_list().mark();
  for (const auto key : keys)
    p.str(key);
  return p.appends().stop().bytes();
}

/// An int64 little-endian element count.
inline std::string count(std::uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

/// `n` float32 values 0, 1, 2, ... as little-endian bytes.
inline std::string floats(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    const float value = static_cast<float>(i);
    char bytes[4];
    std::memcpy(bytes, &value, 4);
    out.append(bytes, 4);
  }
  return out;
}

}  // namespace pthload::test::legacy_build
