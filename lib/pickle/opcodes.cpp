// The opcode table: names and introducing protocol (CPython Lib/pickletools.py, `opcodes`).
#include "pickle/opcodes.hpp"

#include <array>

namespace pthload::pickle {
namespace {

struct OpcodeInfo {
  std::string_view name;
  int protocol = -1;
};

constexpr std::array<OpcodeInfo, 256> make_table() {
  std::array<OpcodeInfo, 256> table{};
  auto set = [&table](Opcode op, std::string_view name, int protocol) {
    table[static_cast<std::uint8_t>(op)] = {name, protocol};
  };
  set(Opcode::kMark, "MARK", 0);
  set(Opcode::kStop, "STOP", 0);
  set(Opcode::kPop, "POP", 0);
  set(Opcode::kPopMark, "POP_MARK", 1);
  set(Opcode::kDup, "DUP", 0);
  set(Opcode::kFloat, "FLOAT", 0);
  set(Opcode::kInt, "INT", 0);
  set(Opcode::kBinInt, "BININT", 1);
  set(Opcode::kBinInt1, "BININT1", 1);
  set(Opcode::kLong, "LONG", 0);
  set(Opcode::kBinInt2, "BININT2", 1);
  set(Opcode::kNone, "NONE", 0);
  set(Opcode::kPersId, "PERSID", 0);
  set(Opcode::kBinPersId, "BINPERSID", 1);
  set(Opcode::kReduce, "REDUCE", 0);
  set(Opcode::kString, "STRING", 0);
  set(Opcode::kBinString, "BINSTRING", 1);
  set(Opcode::kShortBinString, "SHORT_BINSTRING", 1);
  set(Opcode::kUnicode, "UNICODE", 0);
  set(Opcode::kBinUnicode, "BINUNICODE", 1);
  set(Opcode::kAppend, "APPEND", 0);
  set(Opcode::kBuild, "BUILD", 0);
  set(Opcode::kGlobal, "GLOBAL", 0);
  set(Opcode::kDict, "DICT", 0);
  set(Opcode::kEmptyDict, "EMPTY_DICT", 1);
  set(Opcode::kAppends, "APPENDS", 1);
  set(Opcode::kGet, "GET", 0);
  set(Opcode::kBinGet, "BINGET", 1);
  set(Opcode::kInst, "INST", 0);
  set(Opcode::kLongBinGet, "LONG_BINGET", 1);
  set(Opcode::kList, "LIST", 0);
  set(Opcode::kEmptyList, "EMPTY_LIST", 1);
  set(Opcode::kObj, "OBJ", 1);
  set(Opcode::kPut, "PUT", 0);
  set(Opcode::kBinPut, "BINPUT", 1);
  set(Opcode::kLongBinPut, "LONG_BINPUT", 1);
  set(Opcode::kSetItem, "SETITEM", 0);
  set(Opcode::kTuple, "TUPLE", 0);
  set(Opcode::kEmptyTuple, "EMPTY_TUPLE", 1);
  set(Opcode::kSetItems, "SETITEMS", 1);
  set(Opcode::kBinFloat, "BINFLOAT", 1);
  set(Opcode::kProto, "PROTO", 2);
  set(Opcode::kNewObj, "NEWOBJ", 2);
  set(Opcode::kExt1, "EXT1", 2);
  set(Opcode::kExt2, "EXT2", 2);
  set(Opcode::kExt4, "EXT4", 2);
  set(Opcode::kTuple1, "TUPLE1", 2);
  set(Opcode::kTuple2, "TUPLE2", 2);
  set(Opcode::kTuple3, "TUPLE3", 2);
  set(Opcode::kNewTrue, "NEWTRUE", 2);
  set(Opcode::kNewFalse, "NEWFALSE", 2);
  set(Opcode::kLong1, "LONG1", 2);
  set(Opcode::kLong4, "LONG4", 2);
  set(Opcode::kBinBytes, "BINBYTES", 3);
  set(Opcode::kShortBinBytes, "SHORT_BINBYTES", 3);
  set(Opcode::kShortBinUnicode, "SHORT_BINUNICODE", 4);
  set(Opcode::kBinUnicode8, "BINUNICODE8", 4);
  set(Opcode::kBinBytes8, "BINBYTES8", 4);
  set(Opcode::kEmptySet, "EMPTY_SET", 4);
  set(Opcode::kAddItems, "ADDITEMS", 4);
  set(Opcode::kFrozenSet, "FROZENSET", 4);
  set(Opcode::kNewObjEx, "NEWOBJ_EX", 4);
  set(Opcode::kStackGlobal, "STACK_GLOBAL", 4);
  set(Opcode::kMemoize, "MEMOIZE", 4);
  set(Opcode::kFrame, "FRAME", 4);
  set(Opcode::kByteArray8, "BYTEARRAY8", 5);
  set(Opcode::kNextBuffer, "NEXT_BUFFER", 5);
  set(Opcode::kReadonlyBuffer, "READONLY_BUFFER", 5);
  return table;
}

constexpr std::array<OpcodeInfo, 256> kTable = make_table();

}  // namespace

std::string_view opcode_name(std::uint8_t opcode) noexcept {
  return kTable[opcode].name;
}

int opcode_protocol(std::uint8_t opcode) noexcept {
  return kTable[opcode].protocol;
}

OperandLayout operand_layout(std::uint8_t opcode) noexcept {
  switch (static_cast<Opcode>(opcode)) {
    case Opcode::kFloat:
    case Opcode::kInt:
    case Opcode::kLong:
    case Opcode::kPersId:
    case Opcode::kString:
    case Opcode::kUnicode:
    case Opcode::kGet:
    case Opcode::kPut:
      return {OperandShape::kLine};
    case Opcode::kGlobal:
    case Opcode::kInst:
      return {OperandShape::kTwoLines};
    case Opcode::kBinInt1:
    case Opcode::kBinGet:
    case Opcode::kBinPut:
    case Opcode::kProto:
    case Opcode::kExt1:
      return {OperandShape::kFixed, 1};
    case Opcode::kBinInt2:
    case Opcode::kExt2:
      return {OperandShape::kFixed, 2};
    case Opcode::kBinInt:
    case Opcode::kLongBinGet:
    case Opcode::kLongBinPut:
    case Opcode::kExt4:
      return {OperandShape::kFixed, 4};
    case Opcode::kBinFloat:
    case Opcode::kFrame:
      return {OperandShape::kFixed, 8};
    case Opcode::kLong1:
    case Opcode::kShortBinString:
    case Opcode::kShortBinUnicode:
      return {OperandShape::kCounted, 1};
    case Opcode::kLong4:
    case Opcode::kBinString:
      return {OperandShape::kCounted, 4, true};
    case Opcode::kBinUnicode:
      return {OperandShape::kCounted, 4};
    case Opcode::kBinUnicode8:
      return {OperandShape::kCounted, 8};
    case Opcode::kShortBinBytes:
      return {OperandShape::kCountedBytes, 1};
    case Opcode::kBinBytes:
      return {OperandShape::kCountedBytes, 4};
    case Opcode::kBinBytes8:
    case Opcode::kByteArray8:
      return {OperandShape::kCountedBytes, 8};
    default:
      return {};
  }
}

}  // namespace pthload::pickle
