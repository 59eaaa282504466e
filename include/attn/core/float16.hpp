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
  // Both conversions choose among their cases' results rather than branch to them (CPU training
  // in float16 ran 2.5 times as long as in bfloat16, most of the difference its conversions). A
  // loop of them still branches where GCC has no vector select for the choice; whole arrays go
  // through cpu/conversions.hpp, the same operations written as masks.
  ATTN_HOST_DEVICE constexpr operator float() const {
    const std::uint32_t sign = std::uint32_t(bits & 0x8000u) << 16;
    const std::uint32_t shifted = std::uint32_t(bits & 0x7FFFu) << 13;  // exponent and fraction in float's places
    const std::uint32_t exponent = shifted & 0x0F800000u;
    const std::uint32_t normal = shifted + (112u << 23);    // rebias 15 → 127
    const std::uint32_t special = normal + (112u << 23);    // 31 → 255: ∞, NaN (its payload kept)
    // Zero or subnormal: fraction · 2⁻²⁴, as (2⁻¹⁴ + fraction · 2⁻²⁴) − 2⁻¹⁴, exact in float.
    const std::uint32_t small = detail::float_bits(detail::bits_float(normal + (1u << 23)) - 6.103515625e-5f);
    return detail::bits_float(sign | (exponent == 0x0F800000u ? special : exponent == 0 ? small : normal));
  }
  ATTN_HOST_DEVICE static constexpr float16 from_bits(std::uint16_t b) {
    float16 x;
    x.bits = b;
    return x;
  }

 private:
  ATTN_HOST_DEVICE static constexpr std::uint16_t round(std::uint32_t f) {
    const std::uint32_t sign = (f >> 16) & 0x8000u, magnitude = f & 0x7FFFFFFFu;
    // Normal: rebias the exponent (127 → 15) and drop 13 fraction bits; adding 0xFFF and the
    // lowest kept bit rounds to the nearest, ties to even, as in bfloat16, and a carry out of
    // the fraction is the next binade.
    const std::uint32_t normal = (magnitude - (112u << 23) + 0xFFFu + ((magnitude >> 13) & 1u)) >> 13;
    // Below 2⁻¹⁴, subnormal: adding 0.5 leaves the bits of the units of 2⁻²⁴, rounded to the
    // nearest, ties to even, by the float addition itself (whose sum is normal, so flushing
    // subnormals to zero changes nothing: a float subnormal rounds to zero either way).
    const std::uint32_t subnormal = detail::float_bits(detail::bits_float(magnitude) + 0.5f) - 0x3F000000u;
    const std::uint32_t rounded = magnitude > 0x7F800000u    ? 0x7E00u   // NaN
                                  : magnitude >= 0x477FF000u ? 0x7C00u   // ≥ 65520 (and ∞): ∞
                                  : magnitude < 0x38800000u  ? subnormal
                                                             : normal;
    return std::uint16_t(sign | rounded);
  }
};

/// Whether T is one of the 16-bit storage types.
template <class T>
inline constexpr bool is_float16_storage = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

/// The type a kernel accumulates T's in: float for the 16-bit types, T itself otherwise.
template <class T>
using accumulate_t = std::conditional_t<is_float16_storage<std::remove_const_t<T>>, float, std::remove_const_t<T>>;

}  // namespace attn
