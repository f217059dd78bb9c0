// Scalar conversions between float32 and the narrow floating formats (bfloat16, float16,
// float8_e4m3fn, float8_e5m2), bit for bit as torch's .to() rounds them (c10/util/BFloat16.h
// round_to_nearest_even, Half.h fp16_ieee_from_fp32_value, Float8_e4m3fn.h, Float8_e5m2.h):
// round to nearest, ties to even. Plain integer code shared by the CPU reference and the CUDA
// kernels (kernels.cu includes it), so both compute the same function.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PTHLOAD_HOST_DEVICE __host__ __device__
#else
#define PTHLOAD_HOST_DEVICE
#endif

namespace pthload::device::bits {

/// A narrow format: `exponent_bits` and `mantissa_bits` (sign apart), and what it does past its
/// largest finite value: infinity (IEEE-like), or, for e4m3fn (whose all-ones exponent is a
/// normal binade and whose only NaN is S.1111.111), saturation to ±448: torch 2.15's .to()
/// sends every finite value past the range, and ±inf, to the largest finite value.
struct NarrowFormat {
  int exponent_bits;
  int mantissa_bits;
  bool has_infinity;
  std::uint32_t nan;  // the NaN torch writes, without the sign
  bool nan_keeps_sign;
};

inline constexpr NarrowFormat kBFloat16{8, 7, true, 0x7FC0, false};
inline constexpr NarrowFormat kFloat16{5, 10, true, 0x7E00, true};
inline constexpr NarrowFormat kFloat8E4M3FN{4, 3, false, 0x7F, true};
inline constexpr NarrowFormat kFloat8E5M2{5, 2, true, 0x7F, true};

/// float32 bits → the format's bits, rounded to nearest even.
PTHLOAD_HOST_DEVICE inline std::uint32_t narrow_from_f32(std::uint32_t f, NarrowFormat format) {
  const int total_bits = 1 + format.exponent_bits + format.mantissa_bits;
  const std::uint32_t sign = (f >> 31) << (total_bits - 1);
  const std::uint32_t magnitude = f & 0x7FFFFFFFu;
  const int bias = (1 << (format.exponent_bits - 1)) - 1;
  const std::uint32_t nan = format.nan | (format.nan_keeps_sign ? sign : 0u);
  if (magnitude > 0x7F800000u) return nan;
  // Largest finite magnitude, and the value it carries once rounded past it.
  const std::uint32_t max_exponent_field =
      format.has_infinity ? (1u << format.exponent_bits) - 2 : (1u << format.exponent_bits) - 1;
  const std::uint32_t max_finite =
      format.has_infinity
          ? (max_exponent_field << format.mantissa_bits) | ((1u << format.mantissa_bits) - 1)
          : (max_exponent_field << format.mantissa_bits) | ((1u << format.mantissa_bits) - 2);
  const std::uint32_t overflow = format.has_infinity
                                     ? sign | ((max_exponent_field + 1) << format.mantissa_bits)
                                     : sign | max_finite;
  if (magnitude == 0x7F800000u) return overflow;
  // float32 denormals have exponent -126 and no implicit bit.
  const bool f32_normal = magnitude >= 0x00800000u;
  const int exponent = f32_normal ? static_cast<int>(magnitude >> 23) - 127 : -126;
  const int shift_normal = 23 - format.mantissa_bits;
  std::uint32_t result;
  if (exponent + bias >= 1) {
    // Normal in the target (or, for bfloat16, any float32): drop `shift_normal` bits of
    // mantissa with ties to even; a carry into the exponent is the right answer (and may reach
    // the overflow pattern). Only bfloat16, with float32's bias, gets here with a denormal.
    const std::uint32_t rebased = magnitude - (static_cast<std::uint32_t>(127 - bias) << 23);
    const std::uint32_t half = 1u << (shift_normal - 1);
    const std::uint32_t odd = (rebased >> shift_normal) & 1u;
    result = (rebased + half - 1 + odd) >> shift_normal;
  } else {
    // Denormal (or zero) in the target: the value in units of the smallest denormal,
    // 2^(1 - bias - mantissa_bits), rounded to nearest even.
    const std::uint32_t mantissa = f32_normal ? (magnitude & 0x7FFFFFu) | 0x800000u : magnitude;
    const int shift = shift_normal + (1 - bias - exponent);
    if (shift > 25) return sign;  // below half the smallest denormal
    const std::uint32_t half = 1u << (shift - 1);
    const std::uint32_t odd = (mantissa >> shift) & 1u;
    result = (mantissa + half - 1 + odd) >> shift;
  }
  if (result > max_finite) return overflow;
  return sign | result;
}

/// The format's bits → float32 bits (exact: every narrow value is a float32).
PTHLOAD_HOST_DEVICE inline std::uint32_t f32_from_narrow(std::uint32_t h, NarrowFormat format) {
  const int total_bits = 1 + format.exponent_bits + format.mantissa_bits;
  const std::uint32_t sign = ((h >> (total_bits - 1)) & 1u) << 31;
  const std::uint32_t exponent_field =
      (h >> format.mantissa_bits) & ((1u << format.exponent_bits) - 1);
  std::uint32_t mantissa = h & ((1u << format.mantissa_bits) - 1);
  const int bias = (1 << (format.exponent_bits - 1)) - 1;
  const std::uint32_t all_ones = (1u << format.exponent_bits) - 1;
  if (format.has_infinity && exponent_field == all_ones) {
    return sign | 0x7F800000u | (mantissa << (23 - format.mantissa_bits));
  }
  if (!format.has_infinity && exponent_field == all_ones &&
      mantissa == (1u << format.mantissa_bits) - 1) {
    return sign | 0x7FC00000u;
  }
  if (exponent_field == 0) {
    if (mantissa == 0) return sign;
    // bfloat16 has float32's exponent range: its denormals are float32 denormals.
    if (bias == 127) return sign | (mantissa << (23 - format.mantissa_bits));
    // Normalise the denormal.
    int exponent = 1 - bias;
    while ((mantissa & (1u << format.mantissa_bits)) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= (1u << format.mantissa_bits) - 1;
    return sign | (static_cast<std::uint32_t>(exponent + 127) << 23) |
           (mantissa << (23 - format.mantissa_bits));
  }
  return sign | ((exponent_field - bias + 127) << 23) | (mantissa << (23 - format.mantissa_bits));
}

}  // namespace pthload::device::bits
