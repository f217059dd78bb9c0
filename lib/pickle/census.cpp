// The opcode census: each opcode's argument skipped by its pickletools encoding (fixed width,
// a newline-terminated line, two lines, or a length prefix), without interpreting it.
#include "pickle/census.hpp"

#include <cstring>

#include "pickle/opcodes.hpp"

namespace pthload::pickle {
namespace {

// The argument's bytes after the opcode at `pos`, or false when it runs past the end.
bool skip_argument(std::uint8_t op, std::span<const std::byte> in, std::size_t& pos) noexcept {
  const std::size_t left = in.size() - pos;
  const auto fixed = [&](std::size_t n) {
    if (left < n) return false;
    pos += n;
    return true;
  };
  const auto line = [&] {
    const void* nl = std::memchr(in.data() + pos, '\n', left);
    if (nl == nullptr) return false;
    pos = static_cast<std::size_t>(static_cast<const std::byte*>(nl) - in.data()) + 1;
    return true;
  };
  // A little-endian length of `width` bytes, then that many bytes.
  const auto counted = [&](std::size_t width, bool is_signed) {
    if (left < width) return false;
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < width; ++i)
      n |= std::to_integer<std::uint64_t>(in[pos + i]) << (8 * i);
    if (is_signed && width == 4 && (n & 0x8000'0000u) != 0) return false;
    if (n > left - width) return false;
    pos += width + static_cast<std::size_t>(n);
    return true;
  };
  switch (static_cast<Opcode>(op)) {
    case Opcode::kFloat:
    case Opcode::kInt:
    case Opcode::kLong:
    case Opcode::kPersId:
    case Opcode::kString:
    case Opcode::kUnicode:
    case Opcode::kGet:
    case Opcode::kPut:
      return line();
    case Opcode::kGlobal:
    case Opcode::kInst:
      return line() && line();
    case Opcode::kBinInt1:
    case Opcode::kBinGet:
    case Opcode::kBinPut:
    case Opcode::kProto:
    case Opcode::kExt1:
      return fixed(1);
    case Opcode::kBinInt2:
    case Opcode::kExt2:
      return fixed(2);
    case Opcode::kBinInt:
    case Opcode::kLongBinGet:
    case Opcode::kLongBinPut:
    case Opcode::kExt4:
      return fixed(4);
    case Opcode::kBinFloat:
    case Opcode::kFrame:
      return fixed(8);
    case Opcode::kLong1:
    case Opcode::kShortBinString:
    case Opcode::kShortBinBytes:
    case Opcode::kShortBinUnicode:
      return counted(1, false);
    case Opcode::kLong4:
    case Opcode::kBinString:
      return counted(4, true);
    case Opcode::kBinUnicode:
    case Opcode::kBinBytes:
      return counted(4, false);
    case Opcode::kBinUnicode8:
    case Opcode::kBinBytes8:
    case Opcode::kByteArray8:
      return counted(8, false);
    default:
      return true;  // no argument
  }
}

}  // namespace

OpcodeCensus opcode_census(std::span<const std::byte> input) noexcept {
  OpcodeCensus census;
  std::size_t pos = 0;
  while (pos < input.size()) {
    const auto op = std::to_integer<std::uint8_t>(input[pos]);
    ++census.counts[op];
    ++pos;
    if (opcode_protocol(op) < 0 || !skip_argument(op, input, pos)) break;
    if (op == static_cast<std::uint8_t>(Opcode::kStop)) {
      census.complete = true;
      break;
    }
  }
  census.end_offset = pos;
  return census;
}

}  // namespace pthload::pickle
