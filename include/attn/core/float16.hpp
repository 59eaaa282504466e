// 16-bit floating-point storage for mixed precision (Micikevicius et al., 2018): bfloat16 (float's
// 8 exponent bits, 7 fraction bits) and float16 (IEEE 754 binary16: 5 and 10). They hold numbers;
// arithmetic converts them to float, and a kernel that reads them accumulates in float
// (accumulate_t). Conversions from float round to the nearest, ties to even, as the hardware's
// (cvt.rn) and PyTorch's do; NaN stays NaN, and float16 overflows to ±∞ from 65520 on.
#pragma once

#include <cstdint>
#include <type_traits>

#include "config.hpp"

namespace attn {

namespace detail {
// __builtin_bit_cast rather than std::bit_cast: constexpr in device code too, without nvcc's
// --expt-relaxed-constexpr (so that constants such as nn::masked<bfloat16> are constexpr).
ATTN_HOST_DEVICE constexpr std::uint32_t float_bits(float x) { return __builtin_bit_cast(std::uint32_t, x); }
ATTN_HOST_DEVICE constexpr float bits_float(std::uint32_t bits) { return __builtin_bit_cast(float, bits); }
}  // namespace detail

/// bfloat16: the upper half of a float.
struct bfloat16 {
  std::uint16_t bits = 0;

  bfloat16() = default;
  ATTN_HOST_DEVICE constexpr bfloat16(float x) : bits(round(detail::float_bits(x))) {}  // NOLINT: converts like float
  ATTN_HOST_DEVICE constexpr operator float() const { return detail::bits_float(std::uint32_t(bits) << 16); }
  ATTN_HOST_DEVICE static constexpr bfloat16 from_bits(std::uint16_t b) {
    bfloat16 x;
    x.bits = b;
    return x;
  }

 private:
  ATTN_HOST_DEVICE static constexpr std::uint16_t round(std::uint32_t f) {
    if ((f & 0x7FFFFFFFu) > 0x7F800000u) return std::uint16_t((f >> 16) | 0x0040u);  // a quiet NaN
    // Adding 0x7FFF rounds up exactly the halves above the tie; the lowest kept bit breaks ties
    // to even. A carry into the exponent is the next binade, and past the largest finite, ∞.
    return std::uint16_t((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
  }
};

/// IEEE 754 binary16 ("half"), with subnormals.
struct float16 {
  std::uint16_t bits = 0;

  float16() = default;
  ATTN_HOST_DEVICE constexpr float16(float x) : bits(round(detail::float_bits(x))) {}  // NOLINT: converts like float
  ATTN_HOST_DEVICE constexpr operator float() const {
    const std::uint32_t sign = std::uint32_t(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1Fu, fraction = bits & 0x3FFu;
    if (exponent == 0x1F) return detail::bits_float(sign | 0x7F800000u | (fraction << 13));  // ∞, NaN
    if (exponent == 0) {  // zero or subnormal: fraction · 2⁻²⁴, exact in float
      const float magnitude = float(fraction) * 5.9604644775390625e-8f;
      return sign ? -magnitude : magnitude;
    }
    return detail::bits_float(sign | ((exponent + 112) << 23) | (fraction << 13));  // rebias 15 → 127
  }
  ATTN_HOST_DEVICE static constexpr float16 from_bits(std::uint16_t b) {
    float16 x;
    x.bits = b;
    return x;
  }

 private:
  /// Keeps `value` >> shift, rounding the dropped bits to the nearest, ties to even.
  ATTN_HOST_DEVICE static constexpr std::uint32_t shift_rounding(std::uint32_t value, std::uint32_t shift) {
    const std::uint32_t kept = value >> shift, dropped = value & ((1u << shift) - 1), half = 1u << (shift - 1);
    return kept + ((dropped > half || (dropped == half && (kept & 1u))) ? 1u : 0u);
  }
  ATTN_HOST_DEVICE static constexpr std::uint16_t round(std::uint32_t f) {
    const std::uint32_t sign = (f >> 16) & 0x8000u, magnitude = f & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) return std::uint16_t(sign | 0x7E00u);   // NaN
    if (magnitude >= 0x477FF000u) return std::uint16_t(sign | 0x7C00u);  // ≥ 65520 (and ∞): ∞
    if (magnitude < 0x38800000u) {                                      // below 2⁻¹⁴: subnormal
      if (magnitude <= 0x33000000u) return std::uint16_t(sign);          // ≤ 2⁻²⁵: to zero (a tie at 2⁻²⁵)
      const std::uint32_t exponent = magnitude >> 23, significand = (magnitude & 0x7FFFFFu) | 0x800000u;
      return std::uint16_t(sign | shift_rounding(significand, 126 - exponent));  // in units of 2⁻²⁴
    }
    // Normal: rebias the exponent (127 → 15) and drop 13 fraction bits; a carry out of the
    // fraction is the next binade, as in bfloat16.
    return std::uint16_t(sign | shift_rounding(magnitude - (112u << 23), 13));
  }
};

/// Whether T is one of the 16-bit storage types.
template <class T>
inline constexpr bool is_float16_storage = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

/// The type a kernel accumulates T's in: float for the 16-bit types, T itself otherwise.
template <class T>
using accumulate_t = std::conditional_t<is_float16_storage<std::remove_const_t<T>>, float, std::remove_const_t<T>>;

}  // namespace attn
