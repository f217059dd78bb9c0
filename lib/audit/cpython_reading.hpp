// How CPython's C unpickler reads a pickle through a file object without `peek` (io.BytesIO,
// which is how torch.load reads data.pkl): Modules/_pickle.c keeps a FRAME's bytes in its buffer,
// and a read the buffer cannot satisfy replaces the buffer with bytes read from the file, so the
// rest of the frame is dropped (python/cpython#154848; fixed in 3.13.15 and 3.14.7, which refuse
// such pickles). pickletools, the pure-Python unpickler and pthload read those bytes in place.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace pthload::audit {

/// The bytes CPython's C unpickler consumes, in order, and whether that differs from reading the
/// pickle straight through.
struct CPythonReading {
  /// The input offset of the first opcode whose read left bytes of a frame behind (CPython then
  /// reads that opcode's operand from after the frame); nullopt when CPython reads the pickle
  /// straight through, as pthload does.
  std::optional<std::size_t> divergence;
  /// Why, for the finding: which opcode, which frame, how many bytes dropped.
  std::string divergence_reason;
  /// Where a FRAME begins inside the previous frame (the pure-Python unpickler refuses this;
  /// the C one reads on), or nullopt.
  std::optional<std::size_t> nested_frame;
  /// With a divergence: the opcodes and operands in the order CPython consumes them, FRAMEs
  /// left out (their effect is in which bytes come next), up to STOP or to where CPython's reads
  /// fail. Empty otherwise.
  std::vector<std::byte> bytes;
  /// With a divergence: where each run of `bytes` came from in the input, in order.
  struct Run {
    std::size_t at = 0;    ///< offset in `bytes`
    std::size_t from = 0;  ///< offset in the input
  };
  std::vector<Run> runs;

  /// The input offset that `bytes[at]` was read from.
  [[nodiscard]] std::size_t input_offset(std::size_t at) const;
};

/// Models CPython's reads of the pickle at the start of `input`, up to its STOP.
[[nodiscard]] CPythonReading read_as_cpython(std::span<const std::byte> input);

}  // namespace pthload::audit
