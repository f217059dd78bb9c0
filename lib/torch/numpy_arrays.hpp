// numpy arrays and scalars as a pickle spells them: numpy.core.multiarray._reconstruct(ndarray,
// (0,), b'b') + BUILD (version, shape, dtype, is_fortran, raw bytes), scalar(dtype, raw bytes),
// dtype('f8', False, True) + BUILD (3, byte order, ...) (numpy/core/_methods.py,
// numpy/core/src/multiarray/methods.c array_setstate, descriptor.c arraydescr_setstate;
// docs/format.md §3, the numpy bullet).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/mapped_file.hpp"
#include "pickle/value.hpp"
#include "pthload/dtype.hpp"
#include "torch/spelled_bytes.hpp"

namespace pthload::torch {

/// What a numpy array's pickle says, read without copying its bytes when they are raw bytes.
struct NumpyArray {
  Dtype dtype = Dtype::kUInt8;
  /// The dtype's byte order is '>' (elements need swapping on this little-endian reader).
  bool big_endian = false;
  std::vector<std::int64_t> sizes;
  /// In elements: row-major, or column-major for an is_fortran array (a scalar has none).
  std::vector<std::int64_t> strides;
  /// The raw bytes, numel × element size of them: a view of the pickle's input when it held
  /// them as bytes (protocol 3+ BINBYTES), valid while that input lives ...
  std::span<const std::byte> raw_view;
  /// ... or decoded, when they came as protocol 2's _codecs.encode(text, encoding): shared with
  /// every array whose bytes are spelled alike (SpelledBytes).
  std::shared_ptr<const common::MappedFile> raw_decoded;
  /// The raw bytes, wherever they are; valid while this NumpyArray (and the pickle) lives.
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return raw_decoded ? raw_decoded->bytes() : raw_view;
  }
};

/// A numpy value that is well formed but no tensor: an object array, a string or datetime dtype,
/// a structured dtype. `reason` says which, for the user.
struct NumpyOpaque {
  std::string reason;
};

/// Whether `value` is a numpy array (_reconstruct call) or a numpy scalar (scalar call).
[[nodiscard]] bool is_numpy_value(const pickle::Value& value) noexcept;

/// Reads the array or scalar `value` (is_numpy_value), taking bytes that protocol 2 spells as
/// calls from `spelled` (decoding each spelling once). Throws FormatError(kTorchBadNumpyArray)
/// for a malformed one: a BUILD state of the wrong shape or types, an unknown byte order, raw
/// bytes that are not exactly numel × element size (numpy refuses those too), sizes whose byte
/// count overflows; and as pickle::spelling_of and pickle::bytes_of for bytes spelled wrong.
[[nodiscard]] std::variant<NumpyArray, NumpyOpaque> read_numpy(const pickle::Value& value,
                                                               SpelledBytes& spelled);

}  // namespace pthload::torch
