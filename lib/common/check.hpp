// One-line checks of input and one way for a layer to add what it knows to an error passing
// through it (zstd's RETURN_ERROR_IF and FORWARD_IF_ERROR, lib/common/error_private.h, as
// functions). The error is made only when the check fails: the success path pays one branch.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <new>
#include <optional>
#include <string_view>
#include <utility>

#include "pthload/error.hpp"

namespace pthload::common {

/// Throws what `make_error()` returns unless `condition` holds: for errors that carry a context
/// or are not FormatErrors, `check(n <= limit, [&] { return UnsupportedError(...); })`.
template <typename MakeError>
void check(bool condition, MakeError&& make_error) {
  if (!condition) [[unlikely]] {
    throw std::forward<MakeError>(make_error)();
  }
}

/// Throws FormatError(`code`, the formatted message) unless `condition` holds. The arguments are
/// borrowed and formatted only on failure.
template <typename... Args>
void require_format(bool condition, Errc code, fmt::format_string<Args...> message,
                    Args&&... args) {
  if (!condition) [[unlikely]] {
    throw FormatError(code, fmt::format(message, std::forward<Args>(args)...));
  }
}

/// Where an error happened, as far as one layer knows: borrowed for the call it wraps, so naming
/// it costs nothing unless an error passes.
struct ContextToAdd {
  std::string_view path;
  std::string_view record;
  std::optional<std::uint64_t> offset;
  std::optional<std::uint8_t> opcode;
};

/// Gives `context` the fields of `add` it does not have yet: what a lower layer said stays.
inline void fill_missing(ErrorContext& context, const ContextToAdd& add) {
  if (context.path.empty()) context.path = add.path;
  if (context.record.empty()) context.record = add.record;
  if (!context.offset) context.offset = add.offset;
  if (!context.opcode) context.opcode = add.opcode;
}

/// Runs `body` and returns what it returns; an Error escaping it gets the fields of `add` it
/// lacks (fill_missing) and goes on. The layer that detects a problem gives the offset, the
/// layers above it the record and the path (docs: STYLE.md "Errors").
template <typename Body>
decltype(auto) with_context(const ContextToAdd& add, Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (Error& e) {
    fill_missing(e.context(), add);
    throw;
  }
}

/// with_context, and a std::bad_alloc escaping `body` becomes OutOfMemoryError (kOutOfMemory,
/// "out of memory while <doing>", with `add`'s path and record): what the rooms that open and
/// load checkpoints tell their callers, said once.
template <typename Body>
decltype(auto) with_context(const ContextToAdd& add, std::string_view doing, Body&& body) {
  try {
    return with_context(add, std::forward<Body>(body));
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(Errc::kOutOfMemory, fmt::format("out of memory while {}", doing),
                           {.path = std::string(add.path), .record = std::string(add.record)});
  }
}

}  // namespace pthload::common
