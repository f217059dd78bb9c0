// An opcode census of one pickle, read linearly as pickletools.genops reads it (CPython
// Lib/pickletools.py): no value is built and nothing is interpreted, so it also describes a
// pickle the Machine refuses. What an auditor compares with the opcodes torch.save writes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pthload::pickle {

/// How often each opcode occurs in one pickle, and where it ends.
struct OpcodeCensus {
  /// counts[b]: how many opcodes with byte b were read.
  std::array<std::uint64_t, 256> counts{};
  /// Offset just past STOP (or where reading stopped, when `complete` is false).
  std::size_t end_offset = 0;
  /// Whether a STOP was reached; false when the input ended first or held a byte that is no
  /// opcode (whose count is still recorded).
  bool complete = false;
};

/// Reads opcodes from the start of `input` up to and including the first STOP. Never throws.
[[nodiscard]] OpcodeCensus opcode_census(std::span<const std::byte> input) noexcept;

/// Where each opcode opcode_census() reads starts, in order (the byte that is no opcode, or
/// whose argument runs past the end, included): what the machine is checked against.
[[nodiscard]] std::vector<std::size_t> opcode_starts(std::span<const std::byte> input);

}  // namespace pthload::pickle
