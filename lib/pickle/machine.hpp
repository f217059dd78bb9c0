// The safe pickle virtual machine: runs protocol 0-5 opcodes into a value tree and never
// imports or calls anything (CPython Lib/pickle.py `_Unpickler`, Modules/_pickle.c; opcode
// semantics in Lib/pickletools.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "pickle/value.hpp"
#include "pthload/limits.hpp"

namespace pthload::pickle {

/// What one run produced. Move-only: it owns the arena every Value lives in. Strings, bytes
/// and global names may be views into the input bytes, so the input must outlive the Result.
struct Result {
  std::unique_ptr<ValueArena> arena;
  const Value* root = nullptr;  ///< the value STOP returned
  std::size_t end_offset = 0;   ///< offset just past STOP, relative to the input span
  int protocol = 0;             ///< the last PROTO seen (0 without one)
};

/// Called for PERSID (the id is a kString) and BINPERSID (any value, for torch.save a 5-tuple)
/// with the arena the value to push must live in. Returning nullptr pushes a kPersistent
/// wrapping the id, as happens without a callback. May throw; the exception propagates.
using PersistentLoad = std::function<const Value*(const Value& id, ValueArena& arena)>;

struct RunOptions {
  /// Without it, bytes after STOP are a FormatError (kPickleTrailingBytes); with it the run
  /// ends at STOP and Result::end_offset says where, for streams of stacked pickles.
  bool allow_trailing_bytes = false;
  /// Added to every offset an error reports, when the input is a slice of a larger stream.
  std::uint64_t base_offset = 0;
  PersistentLoad persistent_load;
  /// For auditors: called with every global the run makes (GLOBAL, STACK_GLOBAL, INST's class)
  /// and every call (REDUCE, NEWOBJ, NEWOBJ_EX, INST, OBJ), whether or not the result reaches
  /// them: Python's unpickler imports and calls a value even when it is popped off the stack
  /// afterwards. Must not throw.
  std::function<void(const Value& value)> on_global_or_call;
  /// For auditors: called with BUILD's target and state, whatever the target (Python calls its
  /// __setstate__, or sets attributes on it: on a class or module, for the whole process). Must
  /// not throw.
  std::function<void(const Value& target, const Value& state)> on_build;
  /// Called when run() throws, before the values it made are released: whatever reads them on
  /// another thread meanwhile (the torch layer's prebuilt tensors) must stop first. Must not
  /// throw.
  std::function<void()> on_abandon;
};

/// Runs pickles. Holds its limits and scratch space (stack, marks, the memo's sparse keys) reused
/// from run to run; not thread-safe: one Machine per thread.
class Machine {
 public:
  explicit Machine(const Limits& limits = {});

  /// Runs the pickle in `input` up to its STOP. Throws FormatError (malformed input or a limit
  /// exceeded; the context carries the opcode's offset and byte) and UnsupportedError (EXT1/2/4
  /// need copyreg's extension registry, NEXT_BUFFER/READONLY_BUFFER out-of-band buffers, which
  /// no file can carry). The Result borrows `input` (see Result). A callback in `options` must
  /// not run this same Machine (the run holds pointers into its stack).
  [[nodiscard]] Result run(std::span<const std::byte> input, const RunOptions& options = {});

  [[nodiscard]] const Limits& limits() const noexcept { return limits_; }

 private:
  friend class Interpreter;
  Limits limits_;
  std::vector<Value*> stack_;  // the stack's slots; a run keeps its own top (see Interpreter)
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Value*> sparse_memo_;  // keys beyond the dense part
};

}  // namespace pthload::pickle
