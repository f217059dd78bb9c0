// The pickle opcodes of protocols 0-5 and their names (CPython Lib/pickletools.py, Lib/pickle.py).
#pragma once

#include <cstdint>
#include <string_view>

namespace pthload::pickle {

/// Every opcode CPython's unpickler knows, named as in Lib/pickle.py. The value is the byte.
enum class Opcode : std::uint8_t {
  // Protocol 0 and 1.
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kPopMark = '1',
  kDup = '2',
  kFloat = 'F',
  kInt = 'I',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kLong = 'L',
  kBinInt2 = 'M',
  kNone = 'N',
  kPersId = 'P',
  kBinPersId = 'Q',
  kReduce = 'R',
  kString = 'S',
  kBinString = 'T',
  kShortBinString = 'U',
  kUnicode = 'V',
  kBinUnicode = 'X',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kEmptyDict = '}',
  kAppends = 'e',
  kGet = 'g',
  kBinGet = 'h',
  kInst = 'i',
  kLongBinGet = 'j',
  kList = 'l',
  kEmptyList = ']',
  kObj = 'o',
  kPut = 'p',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kEmptyTuple = ')',
  kSetItems = 'u',
  kBinFloat = 'G',
  // Protocol 2.
  kProto = 0x80,
  kNewObj = 0x81,
  kExt1 = 0x82,
  kExt2 = 0x83,
  kExt4 = 0x84,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  // Protocol 3.
  kBinBytes = 'B',
  kShortBinBytes = 'C',
  // Protocol 4.
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e,
  kEmptySet = 0x8f,
  kAddItems = 0x90,
  kFrozenSet = 0x91,
  kNewObjEx = 0x92,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
  // Protocol 5.
  kByteArray8 = 0x96,
  kNextBuffer = 0x97,
  kReadonlyBuffer = 0x98,
};

/// The highest protocol this machine reads (CPython's pickle.HIGHEST_PROTOCOL as of 3.8+).
inline constexpr int kHighestProtocol = 5;

/// The opcode's name as in Lib/pickle.py ("BINUNICODE"), or an empty view for a byte that is no
/// opcode. The view is static.
[[nodiscard]] std::string_view opcode_name(std::uint8_t opcode) noexcept;

/// The protocol that introduced the opcode (0 for protocol 0 and 1 opcodes, which pickletools
/// files under 0 and 1), or -1 for a byte that is no opcode.
[[nodiscard]] int opcode_protocol(std::uint8_t opcode) noexcept;

/// How an opcode's operand follows it (pickletools' argument descriptors), as CPython's
/// unpickler reads it: the linear census and the auditor's model of CPython's buffered reads
/// both take it from here, so they cannot disagree on where an operand ends.
enum class OperandShape : std::uint8_t {
  kNone,
  kFixed,     ///< `width` bytes
  kLine,      ///< bytes up to and including a newline (readline)
  kTwoLines,  ///< two such lines (GLOBAL, INST)
  kCounted,   ///< a little-endian length of `width` bytes, then that many bytes, both read as one
              ///< buffered read each
  kCountedBytes,  ///< the same, but CPython copies the payload with readinto (the bytes family),
                  ///< which reads straight through a frame's end
};

struct OperandLayout {
  OperandShape shape = OperandShape::kNone;
  std::uint8_t width = 0;  ///< kFixed: the operand's size; kCounted*: the length's size
  bool signed_length =
      false;  ///< kCounted: a negative 4-byte length is an error (LONG4, BINSTRING)
};

/// The operand layout of `opcode` (kNone for a byte that is no opcode, too).
[[nodiscard]] OperandLayout operand_layout(std::uint8_t opcode) noexcept;

}  // namespace pthload::pickle
