// A pickle writer for the opcodes torch's weights-only unpickler accepts (protocol 2; no
// FRAME, MEMOIZE, STACK_GLOBAL, SHORT_BINUNICODE, BINBYTES: docs/format.md §13), memoizing as
// CPython's pickler does, so that a state dict comes out as torch.save's pickle does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace pthload::writer {

class Pickler {
 public:
  Pickler();  ///< starts with PROTO 2

  /// GLOBAL module\nname\n, memoized; a later call for the same global is a BINGET.
  void global(std::string_view module, std::string_view name);
  /// BINUNICODE of `text` (UTF-8, checked by the caller), memoized.
  void text(std::string_view text);
  /// `text` memoized under `identity`: a later call with the same identity is a BINGET, as
  /// CPython reuses one string object (torch's 'cpu', a storage's key).
  void shared_text(std::string_view identity, std::string_view text);
  /// The smallest of BININT1, BININT2, BININT, LONG1 that holds `value`, as CPython picks.
  void integer(std::int64_t value);
  void boolean(bool value);
  void mark();
  /// A tuple of the `count` values just pushed: EMPTY_TUPLE, TUPLE1-3, or TUPLE after a MARK the
  /// caller pushed before them (count > 3); memoized unless empty.
  void tuple(std::size_t count);
  void empty_dict();  ///< memoized
  void setitem();
  void setitems();  ///< after a MARK
  void reduce();    ///< memoized; returns nothing, memo_of_last() names it
  void persistent_id();
  void stop();

  /// The memo index of the last memoized value.
  [[nodiscard]] std::uint32_t last_memo() const noexcept { return next_memo_ - 1; }
  /// BINGET of memo entry `index`.
  void get(std::uint32_t index);

  [[nodiscard]] const std::string& bytes() const noexcept { return out_; }
  [[nodiscard]] std::string take() noexcept { return std::move(out_); }

 private:
  void put();
  void op(char opcode) { out_.push_back(opcode); }
  void u32(std::uint32_t value);

  std::string out_;
  std::uint32_t next_memo_ = 0;
  std::unordered_map<std::string, std::uint32_t> shared_;  // global or shared text → memo
};

}  // namespace pthload::writer
