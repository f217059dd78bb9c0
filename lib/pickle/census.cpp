// The opcode census: each opcode's argument skipped by its pickletools encoding (fixed width,
// a newline-terminated line, two lines, or a length prefix), without interpreting it.
#include "pickle/census.hpp"

#include <cstring>
#include <utility>

#include "pickle/opcodes.hpp"

namespace pthload::pickle {
namespace {

// Past the argument of the opcode just read at `pos`, or false when it runs past the end.
bool skip_argument(std::uint8_t op, std::span<const std::byte> in, std::size_t& pos) noexcept {
  const std::size_t left = in.size() - pos;
  const auto line = [&] {
    const void* nl = std::memchr(in.data() + pos, '\n', in.size() - pos);
    if (nl == nullptr) return false;
    pos = static_cast<std::size_t>(static_cast<const std::byte*>(nl) - in.data()) + 1;
    return true;
  };
  const OperandLayout layout = operand_layout(op);
  switch (layout.shape) {
    case OperandShape::kNone:
      return true;
    case OperandShape::kFixed:
      if (left < layout.width) return false;
      pos += layout.width;
      return true;
    case OperandShape::kLine:
      return line();
    case OperandShape::kTwoLines:
      return line() && line();
    case OperandShape::kCounted:
    case OperandShape::kCountedBytes: {
      if (left < layout.width) return false;
      std::uint64_t n = 0;
      for (std::size_t i = 0; i < layout.width; ++i)
        n |= std::to_integer<std::uint64_t>(in[pos + i]) << (8 * i);
      if (layout.signed_length && (n & 0x8000'0000u) != 0) return false;
      if (n > left - layout.width) return false;
      pos += layout.width + static_cast<std::size_t>(n);
      return true;
    }
  }
  return false;
}

// Reads opcodes as pickletools.genops does, calling `visit(offset, opcode)` for each; returns
// where reading stopped and whether a STOP ended it.
template <typename Visit>
std::pair<std::size_t, bool> walk(std::span<const std::byte> input, Visit&& visit) {
  std::size_t pos = 0;
  while (pos < input.size()) {
    const auto op = std::to_integer<std::uint8_t>(input[pos]);
    visit(pos, op);
    ++pos;
    if (opcode_protocol(op) < 0 || !skip_argument(op, input, pos)) break;
    if (op == static_cast<std::uint8_t>(Opcode::kStop)) return {pos, true};
  }
  return {pos, false};
}

}  // namespace

OpcodeCensus opcode_census(std::span<const std::byte> input) noexcept {
  OpcodeCensus census;
  const auto [end, complete] =
      walk(input, [&](std::size_t, std::uint8_t op) { ++census.counts[op]; });
  census.end_offset = end;
  census.complete = complete;
  return census;
}

std::vector<std::size_t> opcode_starts(std::span<const std::byte> input) {
  std::vector<std::size_t> starts;
  (void)walk(input, [&](std::size_t offset, std::uint8_t) { starts.push_back(offset); });
  return starts;
}

}  // namespace pthload::pickle
