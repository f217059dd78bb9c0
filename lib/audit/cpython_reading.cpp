// The model of Modules/_pickle.c's input buffer (3.11-3.13.14): _Unpickler_Read takes bytes from
// the buffer when it holds enough, else _Unpickler_ReadFromFile reads them from the file and
// makes them the whole buffer (what was left is dropped); _Unpickler_Readline likewise reads a
// line from the file when the buffer holds no newline; _Unpickler_ReadInto (the bytes family's
// payloads) copies what the buffer holds and reads the rest from the file, straight through;
// load_frame reads the frame into the buffer and rewinds to its start. Since the buffer always
// holds bytes read from the file just before, the file's position is the buffer's end.
#include "audit/cpython_reading.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "pickle/opcodes.hpp"

namespace pthload::audit {
namespace {

using pickle::Opcode;
using pickle::OperandShape;

class Reader {
 public:
  explicit Reader(std::span<const std::byte> input) : input_(input) {}

  CPythonReading run() {
    // A first pass only looks; the bytes are gathered in a second one when the reads diverge,
    // which real pickles never do.
    (void)walk(false);
    if (!result_.divergence) return std::move(result_);
    CPythonReading looked = std::move(result_);
    *this = Reader(input_);
    (void)walk(true);
    result_.divergence = looked.divergence;
    result_.divergence_reason = std::move(looked.divergence_reason);
    result_.nested_frame = looked.nested_frame;
    return std::move(result_);
  }

 private:
  // An opcode's read as the C unpickler makes it. Returns false when the file has too few bytes
  // (CPython raises there; the model stops).
  bool read(std::size_t count, bool keep) {
    if (count <= buffer_end_ - cursor_) {
      take(cursor_, count, keep);
      cursor_ += count;
      return true;
    }
    drop_rest_of_frame();
    if (count > input_.size() - buffer_end_) return false;
    take(buffer_end_, count, keep);
    buffer_end_ += count;
    cursor_ = buffer_end_;
    return true;
  }

  bool readline(bool keep) {
    const auto* begin = input_.data() + cursor_;
    if (const void* nl = std::memchr(begin, '\n', buffer_end_ - cursor_); nl != nullptr) {
      const std::size_t length =
          static_cast<std::size_t>(static_cast<const std::byte*>(nl) - begin) + 1;
      take(cursor_, length, keep);
      cursor_ += length;
      return true;
    }
    drop_rest_of_frame();
    const auto* file = input_.data() + buffer_end_;
    const void* nl = std::memchr(file, '\n', input_.size() - buffer_end_);
    if (nl == nullptr) return false;  // bad_readline
    const std::size_t length =
        static_cast<std::size_t>(static_cast<const std::byte*>(nl) - file) + 1;
    take(buffer_end_, length, keep);
    buffer_end_ += length;
    cursor_ = buffer_end_;
    return true;
  }

  // _Unpickler_ReadInto: the buffer's bytes, then the file's, with nothing dropped between.
  bool read_into(std::size_t count, bool keep) {
    const std::size_t in_buffer = std::min(count, buffer_end_ - cursor_);
    if (count - in_buffer > input_.size() - buffer_end_) return false;
    take(cursor_, count, keep);
    if (in_buffer == count) {
      cursor_ += count;
    } else {
      buffer_end_ += count - in_buffer;
      cursor_ = buffer_end_;
    }
    return true;
  }

  bool frame(std::size_t opcode_at) {
    if (!read(8, false)) return false;
    std::uint64_t length = 0;
    for (std::size_t i = 0; i < 8; ++i)
      length |= std::to_integer<std::uint64_t>(input_[last_taken_ + i]) << (8 * i);
    if (length <= buffer_end_ - cursor_) {
      // A frame inside the buffered one: _Unpickler_Read takes it and load_frame rewinds.
      if (length > 0 && !result_.nested_frame) result_.nested_frame = opcode_at;
      return true;
    }
    if (cursor_ < buffer_end_ && !result_.nested_frame) result_.nested_frame = opcode_at;
    drop_rest_of_frame();
    if (length > input_.size() - buffer_end_) return false;
    cursor_ = buffer_end_;
    buffer_end_ += static_cast<std::size_t>(length);
    return true;
  }

  void drop_rest_of_frame() {
    if (cursor_ < buffer_end_ && !result_.divergence) {
      result_.divergence = opcode_at_;
      result_.divergence_reason = fmt::format(
          "the {} at +{:#x} reads past the end of its FRAME, {} byte{} before it: CPython's C "
          "unpickler reading a file (as torch.load does) drops {} and takes the operand from "
          "after the frame, while pickletools and pthload read straight on",
          pickle::opcode_name(opcode_), opcode_at_, buffer_end_ - cursor_,
          buffer_end_ - cursor_ == 1 ? "" : "s", buffer_end_ - cursor_ == 1 ? "it" : "them");
    }
    cursor_ = buffer_end_;
  }

  void take(std::size_t from, std::size_t count, bool keep) {
    last_taken_ = from;
    if (!keep || count == 0) return;
    auto& runs = result_.runs;
    if (runs.empty() || runs.back().from + (result_.bytes.size() - runs.back().at) != from)
      runs.push_back({result_.bytes.size(), from});
    const auto piece = input_.subspan(from, count);
    result_.bytes.insert(result_.bytes.end(), piece.begin(), piece.end());
  }

  // Reads opcodes to STOP. Returns false where CPython's reads would fail.
  bool walk(bool keep) {
    for (;;) {
      if (!read(1, false)) return false;
      opcode_at_ = last_taken_;
      opcode_ = std::to_integer<std::uint8_t>(input_[last_taken_]);
      if (opcode_ == static_cast<std::uint8_t>(Opcode::kFrame)) {
        if (!frame(opcode_at_)) return false;
        continue;
      }
      take(opcode_at_, 1, keep);
      if (pickle::opcode_protocol(opcode_) < 0) return false;
      const pickle::OperandLayout layout = pickle::operand_layout(opcode_);
      bool ok = true;
      switch (layout.shape) {
        case OperandShape::kNone:
          break;
        case OperandShape::kFixed:
          ok = read(layout.width, keep);
          break;
        case OperandShape::kLine:
          ok = readline(keep);
          break;
        case OperandShape::kTwoLines:
          ok = readline(keep) && readline(keep);
          break;
        case OperandShape::kCounted:
        case OperandShape::kCountedBytes: {
          ok = read(layout.width, keep);
          if (!ok) break;
          std::uint64_t length = 0;
          for (std::size_t i = 0; i < layout.width; ++i)
            length |= std::to_integer<std::uint64_t>(input_[last_taken_ + i]) << (8 * i);
          if (layout.signed_length && (length & 0x8000'0000u) != 0) return false;
          if (length > input_.size()) return false;
          ok = layout.shape == OperandShape::kCounted
                   ? read(static_cast<std::size_t>(length), keep)
                   : read_into(static_cast<std::size_t>(length), keep);
          break;
        }
      }
      if (!ok) return false;
      if (opcode_ == static_cast<std::uint8_t>(Opcode::kStop)) return true;
    }
  }

  std::span<const std::byte> input_;
  std::size_t cursor_ = 0;      // the next byte the buffer hands out
  std::size_t buffer_end_ = 0;  // the buffer's end, which is where the file stands
  std::size_t last_taken_ = 0;  // where the latest read's bytes came from
  std::size_t opcode_at_ = 0;
  std::uint8_t opcode_ = 0;
  CPythonReading result_;
};

}  // namespace

std::size_t CPythonReading::input_offset(std::size_t at) const {
  const auto it =
      std::upper_bound(runs.begin(), runs.end(), at,
                       [](std::size_t offset, const Run& run) { return offset < run.at; });
  if (it == runs.begin()) return at;
  const Run& run = *std::prev(it);
  return run.from + (at - run.at);
}

CPythonReading read_as_cpython(std::span<const std::byte> input) {
  return Reader(input).run();
}

}  // namespace pthload::audit
