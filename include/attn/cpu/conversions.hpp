// 16-bit numbers widened to float and floats rounded to 16 bits, over whole arrays, at the
// width of the CPU's vectors (chosen at run time, as vector_math.hpp's loops are). Mixed
// precision on the CPU computes in float (docs/precision.md), so every 16-bit operand of a
// product or a primitive is widened first and every result rounded once: an element at a time
// through Eigen, those conversions were most of a bf16 or fp16 training step's time
// (docs/benchmarks.md). The bits are those of bfloat16's and float16's own conversions
// (core/float16.hpp): the same operations, written here as masks so that the compiler
// vectorises them for SSE2 and AVX2 as well (as selects, it branches there).
//
// The loops are vectorised at every optimisation level that optimises: GCC 12 vectorises a loop
// of unknown length at -O3 alone, and the unit tests (-O1) would otherwise compare three
// scalar loops, and a program built at -O2 run them.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../core/float16.hpp"
#include "threads.hpp"
#include "vector_math.hpp"

#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC push_options
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#endif

namespace attn::cpu_backend::conversions {

namespace detail {

/// All ones where `condition`, else zero.
ATTN_ALWAYS_INLINE std::uint32_t mask(bool condition) { return 0u - std::uint32_t(condition); }

ATTN_ALWAYS_INLINE std::uint32_t pick(std::uint32_t where, std::uint32_t yes, std::uint32_t no) {
  return (where & yes) | (~where & no);
}

/// float16's bits widened to float's: float16::operator float.
ATTN_ALWAYS_INLINE std::uint32_t float16_to_float_bits(std::uint32_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const std::uint32_t shifted = (h & 0x7FFFu) << 13;
  const std::uint32_t exponent = shifted & 0x0F800000u;
  const std::uint32_t normal = shifted + (112u << 23);
  const std::uint32_t special = normal + (112u << 23);
  const std::uint32_t small = std::bit_cast<std::uint32_t>(std::bit_cast<float>(normal + (1u << 23)) - 6.103515625e-5f);
  return sign | pick(mask(exponent == 0x0F800000u), special, pick(mask(exponent == 0), small, normal));
}

/// A float's bits rounded to float16's: float16(float).
ATTN_ALWAYS_INLINE std::uint32_t float_bits_to_float16(std::uint32_t f) {
  const std::uint32_t sign = (f >> 16) & 0x8000u, magnitude = f & 0x7FFFFFFFu;
  const std::uint32_t normal = (magnitude - (112u << 23) + 0xFFFu + ((magnitude >> 13) & 1u)) >> 13;
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(std::bit_cast<float>(magnitude) + 0.5f) - 0x3F000000u;
  const std::uint32_t finite = pick(mask(magnitude < 0x38800000u), subnormal, normal);
  const std::uint32_t large = pick(mask(magnitude > 0x7F800000u), 0x7E00u, 0x7C00u);  // NaN, else ∞
  return sign | pick(mask(magnitude >= 0x477FF000u), large, finite);
}

/// A float's bits rounded to bfloat16's: bfloat16(float).
ATTN_ALWAYS_INLINE std::uint32_t float_bits_to_bfloat16(std::uint32_t f) {
  const std::uint32_t nan = (f >> 16) | 0x0040u;
  const std::uint32_t rounded = (f + 0x7FFFu + ((f >> 16) & 1u)) >> 16;
  return pick(mask((f & 0x7FFFFFFFu) > 0x7F800000u), nan, rounded);
}

template <class T>
ATTN_ALWAYS_INLINE void widen_body(float* out, const T* in, index_t n) {
  for (index_t i = 0; i < n; ++i) {
    const std::uint32_t h = in[i].bits;
    if constexpr (std::is_same_v<T, bfloat16>) out[i] = std::bit_cast<float>(h << 16);
    else out[i] = std::bit_cast<float>(float16_to_float_bits(h));
  }
}

template <class T>
ATTN_ALWAYS_INLINE void narrow_body(T* out, const float* in, index_t n) {
  for (index_t i = 0; i < n; ++i) {
    const std::uint32_t f = std::bit_cast<std::uint32_t>(in[i]);
    if constexpr (std::is_same_v<T, bfloat16>) out[i].bits = std::uint16_t(float_bits_to_bfloat16(f));
    else out[i].bits = std::uint16_t(float_bits_to_float16(f));
  }
}

#if ATTN_VECTOR_DISPATCH
#define ATTN_AVX512 [[gnu::target("avx512f,avx512dq,avx512vl,avx2,avx,sse4.2")]]
#define ATTN_AVX2 [[gnu::target("avx2,avx,sse4.2")]]
template <class T>
ATTN_AVX512 void widen_avx512(float* out, const T* in, index_t n) {
  widen_body(out, in, n);
}
template <class T>
ATTN_AVX2 void widen_avx2(float* out, const T* in, index_t n) {
  widen_body(out, in, n);
}
template <class T>
ATTN_AVX512 void narrow_avx512(T* out, const float* in, index_t n) {
  narrow_body(out, in, n);
}
template <class T>
ATTN_AVX2 void narrow_avx2(T* out, const float* in, index_t n) {
  narrow_body(out, in, n);
}
#undef ATTN_AVX512
#undef ATTN_AVX2
#endif

/// Pieces of at least this many numbers a thread: below, a fork-join costs more than it saves.
inline constexpr index_t per_thread = index_t{1} << 15;

}  // namespace detail

/// out[i] = float(in[i]) for i < n, with the vectors of `set` (which this CPU must run).
template <class T>
  requires is_float16_storage<T>
void widen(float* out, const T* in, index_t n, vector_math::isa set = vector_math::widest()) {
  parallel_for(n, 64, detail::per_thread, [&](index_t begin, index_t end) {
#if ATTN_VECTOR_DISPATCH
    if (set == vector_math::isa::avx512) return detail::widen_avx512(out + begin, in + begin, end - begin);
    if (set == vector_math::isa::avx2) return detail::widen_avx2(out + begin, in + begin, end - begin);
#endif
    (void)set;
    detail::widen_body(out + begin, in + begin, end - begin);
  });
}

/// out[i] = T(in[i]) for i < n, each rounded to the nearest, ties to even.
template <class T>
  requires is_float16_storage<T>
void narrow(T* out, const float* in, index_t n, vector_math::isa set = vector_math::widest()) {
  parallel_for(n, 64, detail::per_thread, [&](index_t begin, index_t end) {
#if ATTN_VECTOR_DISPATCH
    if (set == vector_math::isa::avx512) return detail::narrow_avx512(out + begin, in + begin, end - begin);
    if (set == vector_math::isa::avx2) return detail::narrow_avx2(out + begin, in + begin, end - begin);
#endif
    (void)set;
    detail::narrow_body(out + begin, in + begin, end - begin);
  });
}

/// A 16-bit array's values in float, a new vector (empty for a null pointer): the inputs of the
/// primitives' and the fused attention's float kernels.
template <class T>
  requires is_float16_storage<T>
std::vector<float> widened(const T* in, index_t n) {
  std::vector<float> wide(in ? static_cast<std::size_t>(n) : 0);
  widen(wide.data(), in, index_t(wide.size()));
  return wide;
}

}  // namespace attn::cpu_backend::conversions

#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC pop_options
#endif
