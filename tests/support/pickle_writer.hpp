// Test helper: writes protocol-2 pickles opcode by opcode, as torch.save's pickler does, so
// tests can build well-formed and hostile data.pkl records (opcodes: CPython Lib/pickletools.py).
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace pthload::test {

class PickleWriter {
 public:
  PickleWriter() { raw("\x80\x02"); }

  PickleWriter& raw(std::string_view bytes) {
    out_ += bytes;
    return *this;
  }
  PickleWriter& op(char opcode) {
    out_ += opcode;
    return *this;
  }
  PickleWriter& mark() { return op('('); }
  PickleWriter& tuple() { return op('t'); }
  PickleWriter& empty_tuple() { return op(')'); }
  PickleWriter& empty_dict() { return op('}'); }
  PickleWriter& empty_list() { return op(']'); }
  PickleWriter& setitem() { return op('s'); }
  PickleWriter& setitems() { return op('u'); }
  PickleWriter& append() { return op('a'); }
  PickleWriter& appends() { return op('e'); }
  PickleWriter& reduce() { return op('R'); }
  PickleWriter& build() { return op('b'); }
  PickleWriter& binpersid() { return op('Q'); }
  PickleWriter& none() { return op('N'); }
  PickleWriter& boolean(bool value) { return op(value ? '\x88' : '\x89'); }
  PickleWriter& stop() { return op('.'); }
  PickleWriter& put(std::uint8_t index) {
    op('q');
    out_ += static_cast<char>(index);
    return *this;
  }
  PickleWriter& get(std::uint8_t index) {
    op('h');
    out_ += static_cast<char>(index);
    return *this;
  }
  PickleWriter& global(std::string_view module, std::string_view name) {
    op('c');
    out_ += module;
    out_ += '\n';
    out_ += name;
    out_ += '\n';
    return *this;
  }
  PickleWriter& str(std::string_view text) {
    op('X');
    le32(static_cast<std::uint32_t>(text.size()));
    out_ += text;
    return *this;
  }
  PickleWriter& integer(std::int64_t value) {
    if (value >= INT32_MIN && value <= INT32_MAX) {
      op('J');
      le32(static_cast<std::uint32_t>(static_cast<std::int32_t>(value)));
    } else {
      op('\x8a');  // LONG1 with 8 bytes
      out_ += '\x08';
      for (int i = 0; i < 8; ++i)
        out_ += static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff);
    }
    return *this;
  }
  /// BINFLOAT: an IEEE double, big-endian.
  PickleWriter& real(double value) {
    op('G');
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    for (int i = 7; i >= 0; --i)
      out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
    return *this;
  }
  PickleWriter& ints(std::span<const std::int64_t> values) {
    mark();
    for (const auto v : values)
      integer(v);
    return tuple();
  }
  PickleWriter& ints(std::initializer_list<std::int64_t> values) {
    return ints(std::span(values.begin(), values.size()));
  }
  /// ('storage', torch.<type>, key, location, numel) as BINPERSID.
  PickleWriter& storage(std::string_view type, std::string_view key, std::string_view location,
                        std::int64_t numel) {
    mark().str("storage").global("torch", type).str(key).str(location).integer(numel).tuple();
    return binpersid();
  }
  /// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()).
  PickleWriter& tensor_v2(std::string_view type, std::string_view key, std::int64_t numel,
                          std::int64_t offset, std::span<const std::int64_t> sizes,
                          std::span<const std::int64_t> strides,
                          std::string_view location = "cpu") {
    global("torch._utils", "_rebuild_tensor_v2").mark();
    storage(type, key, location, numel).integer(offset).ints(sizes).ints(strides).boolean(false);
    global("collections", "OrderedDict").empty_tuple().reduce();
    return tuple().reduce();
  }
  PickleWriter& tensor_v2(std::string_view type, std::string_view key, std::int64_t numel,
                          std::int64_t offset, std::initializer_list<std::int64_t> sizes,
                          std::initializer_list<std::int64_t> strides,
                          std::string_view location = "cpu") {
    return tensor_v2(type, key, numel, offset, std::span(sizes.begin(), sizes.size()),
                     std::span(strides.begin(), strides.size()), location);
  }
  [[nodiscard]] std::string bytes() const { return out_; }

 private:
  void le32(std::uint32_t value) {
    for (int i = 0; i < 4; ++i)
      out_ += static_cast<char>((value >> (8 * i)) & 0xff);
  }
  std::string out_;
};

/// L0 = a tensor over the 8-float storage '0'; Li = [Li-1, Li-1]: 2^levels paths to one tensor
/// through 2 x levels values, for walks that must not follow every path. Without STOP, so a test
/// can end it; levels <= 255 (the memo keys are 1 byte).
inline PickleWriter shared_list_dag(int levels) {
  PickleWriter p;
  p.tensor_v2("FloatStorage", "0", 8, 0, {8}, {1}).put(0);
  for (int level = 1; level <= levels; ++level) {
    const auto previous = static_cast<std::uint8_t>(level - 1);
    p.op('0').empty_list().mark().get(previous).get(previous).appends();
    p.put(static_cast<std::uint8_t>(level));
  }
  return p;
}

}  // namespace pthload::test
