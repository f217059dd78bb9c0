// Element values of every numeric dtype as doubles, decoded from the little-endian bytes
// ElementReader hands out: what stat and diff compute on. Formats: IEEE 754 binary16, bfloat16
// (the top half of binary32), the OCP 8-bit floats (e4m3fn, e5m2) and their FNUZ variants
// (GraphCore/AMD: bias one higher, one NaN 0x80, no negative zero or infinity), e8m0 (exponent
// only), and e2m1 (OCP MX FP4, two per byte, low nibble first).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>

#include <pthload/pthload.hpp>

namespace pthinspect {

/// Whether stat and diff can read the dtype's values: every float, complex, integer and bool
/// dtype, and quantized ones as their stored integers; not the bits types or packed quantized.
[[nodiscard]] inline bool is_numeric(pthload::Dtype dtype) noexcept {
  using pthload::Dtype;
  switch (dtype) {
    case Dtype::kQUInt4x2:
    case Dtype::kQUInt2x4:
    case Dtype::kBits8:
    case Dtype::kBits16:
    case Dtype::kBits1x8:
    case Dtype::kBits2x4:
    case Dtype::kBits4x2:
      return false;
    default:
      return true;
  }
}

/// Whether the dtype's values are complex (stat reads them by magnitude).
[[nodiscard]] inline bool is_complex(pthload::Dtype dtype) noexcept {
  using pthload::Dtype;
  return dtype == Dtype::kComplex32 || dtype == Dtype::kComplex64 || dtype == Dtype::kComplex128;
}

namespace detail {

template <typename T>
[[nodiscard]] inline T load(const std::byte* p) noexcept {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

[[nodiscard]] inline double half_to_double(std::uint16_t h) noexcept {
  const int sign = (h >> 15) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f) {
    return mantissa != 0 ? std::numeric_limits<double>::quiet_NaN()
                         : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

// A small float with `e` exponent bits, `m` mantissa bits and `bias`: sign, exponent, mantissa
// decoded as IEEE does (subnormals at exponent 0); the caller handles NaN and infinity first.
[[nodiscard]] inline double small_float(unsigned bits, int e, int m, int bias) noexcept {
  const int sign = ((bits >> (e + m)) & 1) ? -1 : 1;
  const int exponent = static_cast<int>((bits >> m) & ((1u << e) - 1));
  const int mantissa = static_cast<int>(bits & ((1u << m) - 1));
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - bias - m);
  return sign * std::ldexp(mantissa + (1 << m), exponent - bias - m);
}

[[nodiscard]] inline double float8_to_double(pthload::Dtype dtype, std::uint8_t b) noexcept {
  using pthload::Dtype;
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  switch (dtype) {
    case Dtype::kFloat8E4M3FN:  // no infinity; S.1111.111 is NaN
      return (b & 0x7f) == 0x7f ? kNaN : small_float(b, 4, 3, 7);
    case Dtype::kFloat8E5M2:  // IEEE-like
      if ((b & 0x7c) == 0x7c) return (b & 0x03) != 0 ? kNaN : ((b & 0x80) ? -kInf : kInf);
      return small_float(b, 5, 2, 15);
    case Dtype::kFloat8E4M3FNUZ:
      return b == 0x80 ? kNaN : small_float(b, 4, 3, 8);
    case Dtype::kFloat8E5M2FNUZ:
      return b == 0x80 ? kNaN : small_float(b, 5, 2, 16);
    default:  // kFloat8E8M0FNU: 2^(b - 127), 0xff NaN
      return b == 0xff ? kNaN : std::ldexp(1.0, static_cast<int>(b) - 127);
  }
}

// Calls convert(value) for each whole T in `bytes`.
template <typename T, typename Convert>
void each_element(std::span<const std::byte> bytes, Convert&& convert) {
  for (std::size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T))
    convert(load<T>(bytes.data() + i));
}

}  // namespace detail

/// Calls `visit(re, im)` for each value in `bytes` (whole elements of `dtype`, little-endian);
/// `im` is 0 for real dtypes. float4_e2m1fn_x2 gives two values per element. Requires
/// is_numeric(dtype).
template <typename Visit>
void for_each_value(pthload::Dtype dtype, std::span<const std::byte> bytes, Visit&& visit) {
  using detail::load;
  using pthload::Dtype;
  const std::byte* p = bytes.data();
  const std::size_t n = bytes.size();
  switch (dtype) {
    case Dtype::kFloat64:
      detail::each_element<double>(bytes, [&](double v) { visit(v, 0.0); });
      break;
    case Dtype::kFloat32:
      detail::each_element<float>(bytes, [&](float v) { visit(v, 0.0); });
      break;
    case Dtype::kFloat16:
      detail::each_element<std::uint16_t>(
          bytes, [&](std::uint16_t v) { visit(detail::half_to_double(v), 0.0); });
      break;
    case Dtype::kBFloat16:
      detail::each_element<std::uint16_t>(bytes, [&](std::uint16_t v) {
        visit(static_cast<double>(std::bit_cast<float>(std::uint32_t{v} << 16)), 0.0);
      });
      break;
    case Dtype::kComplex32:
      detail::each_element<std::uint32_t>(bytes, [&](std::uint32_t v) {
        visit(detail::half_to_double(static_cast<std::uint16_t>(v & 0xffff)),
              detail::half_to_double(static_cast<std::uint16_t>(v >> 16)));
      });
      break;
    case Dtype::kComplex64:
      for (std::size_t i = 0; i + 8 <= n; i += 8)
        visit(load<float>(p + i), load<float>(p + i + 4));
      break;
    case Dtype::kComplex128:
      for (std::size_t i = 0; i + 16 <= n; i += 16)
        visit(load<double>(p + i), load<double>(p + i + 8));
      break;
    case Dtype::kBool:
      detail::each_element<std::uint8_t>(bytes,
                                         [&](std::uint8_t v) { visit(v != 0 ? 1.0 : 0.0, 0.0); });
      break;
    case Dtype::kInt8:
    case Dtype::kQInt8:
      detail::each_element<std::int8_t>(bytes, [&](std::int8_t v) { visit(v, 0.0); });
      break;
    case Dtype::kUInt8:
    case Dtype::kQUInt8:
      detail::each_element<std::uint8_t>(bytes, [&](std::uint8_t v) { visit(v, 0.0); });
      break;
    case Dtype::kInt16:
      detail::each_element<std::int16_t>(bytes, [&](std::int16_t v) { visit(v, 0.0); });
      break;
    case Dtype::kUInt16:
      detail::each_element<std::uint16_t>(bytes, [&](std::uint16_t v) { visit(v, 0.0); });
      break;
    case Dtype::kInt32:
    case Dtype::kQInt32:
      detail::each_element<std::int32_t>(bytes, [&](std::int32_t v) { visit(v, 0.0); });
      break;
    case Dtype::kUInt32:
      detail::each_element<std::uint32_t>(bytes, [&](std::uint32_t v) { visit(v, 0.0); });
      break;
    case Dtype::kInt64:
      detail::each_element<std::int64_t>(
          bytes, [&](std::int64_t v) { visit(static_cast<double>(v), 0.0); });
      break;
    case Dtype::kUInt64:
      detail::each_element<std::uint64_t>(
          bytes, [&](std::uint64_t v) { visit(static_cast<double>(v), 0.0); });
      break;
    case Dtype::kFloat8E5M2:
    case Dtype::kFloat8E4M3FN:
    case Dtype::kFloat8E5M2FNUZ:
    case Dtype::kFloat8E4M3FNUZ:
    case Dtype::kFloat8E8M0FNU:
      detail::each_element<std::uint8_t>(
          bytes, [&](std::uint8_t v) { visit(detail::float8_to_double(dtype, v), 0.0); });
      break;
    case Dtype::kFloat4E2M1FNx2:
      detail::each_element<std::uint8_t>(bytes, [&](std::uint8_t v) {
        visit(detail::small_float(v & 0x0f, 2, 1, 1), 0.0);
        visit(detail::small_float(v >> 4, 2, 1, 1), 0.0);
      });
      break;
    default:
      break;
  }
}

}  // namespace pthinspect
