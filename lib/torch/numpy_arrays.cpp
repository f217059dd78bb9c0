// Reading numpy arrays, scalars and dtypes out of the value tree (numpy's array_setstate,
// arraydescr_setstate and scalar reduction; docs/format.md §3, the numpy bullet). Nothing of numpy
// is called: the pickle's arguments are checked and interpreted here.
#include "torch/numpy_arrays.hpp"

#include <fmt/format.h>

#include <charconv>

#include "common/checked.hpp"
#include "pickle/codecs.hpp"
#include "pthload/error.hpp"
#include "torch/globals.hpp"
#include "torch/rebuild_args.hpp"

namespace pthload::torch {
namespace {

using pickle::Kind;
using pickle::Value;

[[noreturn]] void bad_numpy(std::string_view what) {
  throw FormatError(Errc::kTorchBadNumpyArray, fmt::format("numpy array: {}", what));
}

struct NumpyDtype {
  std::optional<Dtype> dtype;  // nullopt: no pthload dtype; `opaque` says why
  bool big_endian = false;
  std::string opaque;
};

// numpy's type codes ('f8', 'i2', 'b1', 'c16'...) for the element types torch also has.
std::optional<Dtype> dtype_of_code(char kind, int itemsize) {
  switch (kind) {
    case 'f':
      if (itemsize == 2) return Dtype::kFloat16;
      if (itemsize == 4) return Dtype::kFloat32;
      if (itemsize == 8) return Dtype::kFloat64;
      return std::nullopt;  // long double: no torch dtype
    case 'i':
      if (itemsize == 1) return Dtype::kInt8;
      if (itemsize == 2) return Dtype::kInt16;
      if (itemsize == 4) return Dtype::kInt32;
      if (itemsize == 8) return Dtype::kInt64;
      return std::nullopt;
    case 'u':
      if (itemsize == 1) return Dtype::kUInt8;
      if (itemsize == 2) return Dtype::kUInt16;
      if (itemsize == 4) return Dtype::kUInt32;
      if (itemsize == 8) return Dtype::kUInt64;
      return std::nullopt;
    case 'b':
      return itemsize == 1 ? std::optional(Dtype::kBool) : std::nullopt;
    case 'c':
      if (itemsize == 8) return Dtype::kComplex64;
      if (itemsize == 16) return Dtype::kComplex128;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// numpy >= 1.25's dtype classes (numpy.dtypes.Float32DType...), by name.
std::optional<Dtype> dtype_of_class(std::string_view name) {
  static constexpr std::pair<std::string_view, Dtype> kClasses[] = {
      {"Float16DType", Dtype::kFloat16},     {"Float32DType", Dtype::kFloat32},
      {"Float64DType", Dtype::kFloat64},     {"Int8DType", Dtype::kInt8},
      {"Int16DType", Dtype::kInt16},         {"Int32DType", Dtype::kInt32},
      {"Int64DType", Dtype::kInt64},         {"UInt8DType", Dtype::kUInt8},
      {"UInt16DType", Dtype::kUInt16},       {"UInt32DType", Dtype::kUInt32},
      {"UInt64DType", Dtype::kUInt64},       {"BoolDType", Dtype::kBool},
      {"Complex64DType", Dtype::kComplex64}, {"Complex128DType", Dtype::kComplex128},
  };
  for (const auto& [class_name, dtype] : kClasses) {
    if (class_name == name) return dtype;
  }
  return std::nullopt;
}

bool is_text(const Value& value) {
  return value.is(Kind::kString) || value.is(Kind::kPython2String);
}

// dtype(code, align, copy) + BUILD (version, byte order, subarray, names, fields, elsize,
// alignment, flags[, metadata]); or a numpy.dtypes class, bare or called.
NumpyDtype read_dtype(const Value& value) {
  const Value* global = value.is(Kind::kCall) ? &value.callable() : &value;
  if (classify_global(*global) != KnownGlobal::kNumpyDtype) {
    bad_numpy(fmt::format("its dtype is a {}, not numpy.dtype(...)", global_name(*global)));
  }
  if (global->module() == "numpy.dtypes") {
    NumpyDtype result{.dtype = dtype_of_class(global->name())};
    if (!result.dtype) result.opaque = fmt::format("numpy dtype {}", global->name());
    return result;
  }
  if (!value.is(Kind::kCall)) bad_numpy("numpy.dtype is not called with a type code");
  const auto args = value.args().items();
  if (args.empty() || !is_text(*args[0])) bad_numpy("numpy.dtype's type code is not a string");
  std::string_view code = args[0]->as_string();
  NumpyDtype result;
  char order = '=';
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
    order = code[0];
    code.remove_prefix(1);
  }
  if (const Value* state = value.state()) {
    const auto fields = state->items();
    if (!state->is(Kind::kTuple) || fields.size() < 2 || !is_text(*fields[1]) ||
        fields[1]->as_string().size() != 1) {
      bad_numpy("numpy.dtype's state is not a (version, byte order, ...) tuple");
    }
    order = fields[1]->as_string()[0];
    // Structured dtypes carry names and fields; a subarray dtype a (base, shape) pair.
    const bool structured = (fields.size() > 3 && !fields[3]->is(Kind::kNone)) ||
                            (fields.size() > 2 && !fields[2]->is(Kind::kNone));
    if (structured) {
      result.opaque = fmt::format("numpy structured or subarray dtype '{}'", code);
      return result;
    }
  }
  // '|': no byte order (one-byte or non-numeric types); '=': native, this reader's (little).
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    bad_numpy(fmt::format("unknown byte order '{}'", order));
  }
  result.big_endian = order == '>';
  int itemsize = 0;
  const char kind = code.empty() ? '\0' : code[0];
  const auto digits = code.substr(code.empty() ? 0 : 1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), itemsize);
  if (error == std::errc() && end == digits.data() + digits.size()) {
    result.dtype = dtype_of_code(kind, itemsize);
  }
  if (!result.dtype) {
    result.opaque = kind == 'O' ? std::string(
                                      "numpy object array (dtype 'O'): its elements are "
                                      "Python objects, not numbers")
                                : fmt::format("numpy dtype '{}' has no torch dtype", code);
  }
  return result;
}

// The bytes of BUILD's raw data: bytes (a view), or protocol 2's _codecs.encode(text,
// 'latin1') (decoded). The spelling is looked up before anything is decoded: many arrays may
// share one memoized state, or one memoized text through calls of their own, and decoding the
// text for each would cost arrays × its size.
void read_raw(const Value& raw, SpelledBytes& spelled, NumpyArray& array) {
  if (raw.is(Kind::kBytes) || raw.is(Kind::kByteArray) || raw.is(Kind::kPython2String)) {
    array.raw_view = raw.as_bytes();
    return;
  }
  const auto spelling = pickle::spelling_of(raw);
  if (!spelling) {
    bad_numpy(fmt::format("its data is a {}, not bytes", pickle::kind_name(raw.kind())));
  }
  array.raw_decoded = spelled.bytes(*spelling);
}

// Strides as numpy's _array_fill_strides makes them: a zero size does not scale the next one.
void fill_strides(NumpyArray& array, bool fortran) {
  const std::size_t n = array.sizes.size();
  array.strides.assign(n, 0);
  std::uint64_t step = 1;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = fortran ? k : n - 1 - k;
    if (step > static_cast<std::uint64_t>(INT64_MAX)) bad_numpy("its strides overflow");
    array.strides[i] = static_cast<std::int64_t>(step);
    if (array.sizes[i] != 0) {
      const auto next = common::checked_mul(step, static_cast<std::uint64_t>(array.sizes[i]));
      if (!next) bad_numpy("its strides overflow");
      step = *next;
    }
  }
}

void check_byte_count(const NumpyArray& array) {
  std::optional<std::uint64_t> nbytes = element_size(array.dtype);
  for (const std::int64_t size : array.sizes) {
    if (nbytes) nbytes = common::checked_mul(*nbytes, static_cast<std::uint64_t>(size));
  }
  // numpy's setstate refuses data whose length is not the array's byte count.
  if (!nbytes || *nbytes != array.bytes().size()) {
    bad_numpy(fmt::format("its {} data bytes are not the {} its shape and dtype need",
                          array.bytes().size(),
                          nbytes ? fmt::format("{}", *nbytes) : std::string("2^64 or more")));
  }
}

std::variant<NumpyArray, NumpyOpaque> read_scalar(const Value& value, SpelledBytes& spelled) {
  // scalar(dtype, raw bytes) (numpy/core/multiarray.c array_scalar; object scalars: (dtype, obj)).
  const auto args = value.args().items();
  if (args.size() != 2) bad_numpy(fmt::format("scalar has {} arguments, not 2", args.size()));
  auto dtype = read_dtype(*args[0]);
  if (!dtype.dtype) return NumpyOpaque{std::move(dtype.opaque)};
  NumpyArray array{.dtype = *dtype.dtype, .big_endian = dtype.big_endian};
  read_raw(*args[1], spelled, array);
  check_byte_count(array);
  return array;
}

}  // namespace

bool is_numpy_value(const Value& value) noexcept {
  if (!value.is(Kind::kCall)) return false;
  const auto kind = classify_global(value.callable());
  return kind == KnownGlobal::kNumpyReconstruct || kind == KnownGlobal::kNumpyScalar;
}

std::variant<NumpyArray, NumpyOpaque> read_numpy(const Value& value, SpelledBytes& spelled) {
  if (classify_global(value.callable()) == KnownGlobal::kNumpyScalar) {
    return read_scalar(value, spelled);
  }
  // _reconstruct(subtype, shape, dtype code): an empty array of `subtype`, filled by BUILD.
  const auto args = value.args().items();
  if (args.size() != 3) bad_numpy(fmt::format("_reconstruct has {} arguments, not 3", args.size()));
  if (!args[0]->is(Kind::kGlobal)) bad_numpy("_reconstruct's subtype is not a class");
  if (!args[0]->is_global("numpy", "ndarray")) {
    // numpy.ma.MaskedArray and friends pickle states of their own.
    return NumpyOpaque{fmt::format("numpy array subclass {}", global_name(*args[0]))};
  }
  const Value* state = value.state();
  if (state == nullptr) return NumpyOpaque{"numpy array without a BUILD state (no data)"};
  auto fields = state->items();
  // (version, shape, dtype, is_fortran, raw) since numpy 1.0; (shape, dtype, is_fortran, raw)
  // before (array_setstate accepts both).
  if (!state->is(Kind::kTuple) || (fields.size() != 5 && fields.size() != 4)) {
    bad_numpy("its state is not a (version, shape, dtype, is_fortran, data) tuple");
  }
  if (fields.size() == 5) {
    if (!fields[0]->is(Kind::kInt)) bad_numpy("its state's version is not an int");
    fields = fields.subspan(1);
  }
  auto dtype = read_dtype(*fields[1]);
  if (!dtype.dtype) return NumpyOpaque{std::move(dtype.opaque)};
  NumpyArray array{.dtype = *dtype.dtype, .big_endian = dtype.big_endian};
  const Value& shape = *fields[0];
  if (!shape.is(Kind::kTuple) && !shape.is(Kind::kList)) bad_numpy("its shape is not a tuple");
  // numpy 2's NPY_MAXDIMS (32 before numpy 2): numpy cannot make, or unpickle, an array of more.
  constexpr std::size_t kMaxNumpyDims = 64;
  static_assert(kMaxNumpyDims <= kMaxDims);
  if (shape.items().size() > kMaxNumpyDims) {
    bad_numpy(fmt::format("its shape has {} dimensions (at most {}, numpy's NPY_MAXDIMS)",
                          shape.items().size(), kMaxNumpyDims));
  }
  for (const Value* size : shape.items()) {
    if (!size->is(Kind::kInt) || size->as_int() < 0) bad_numpy("its shape holds a non-size");
    array.sizes.push_back(size->as_int());
  }
  const Value& is_fortran = *fields[2];
  if (!is_fortran.is(Kind::kBool) && !is_fortran.is(Kind::kInt)) {
    bad_numpy("its is_fortran flag is not a bool");
  }
  const bool fortran = is_fortran.is(Kind::kBool) ? is_fortran.as_bool() : is_fortran.as_int() != 0;
  read_raw(*fields[3], spelled, array);
  check_byte_count(array);
  fill_strides(array, fortran);
  return array;
}

}  // namespace pthload::torch
