// exp over arrays of floats at the width of the CPU's vectors, chosen at run time. attn is
// compiled for x86-64's baseline (SSE2), where Eigen's exp takes 4 floats an instruction; on a
// CPU with AVX2 or AVX-512 the same loops run 8 or 16 at a time. Softmax and log-softmax rows
// (attention weights, next-token log-probabilities over the vocabulary) spend most of their time
// here. Every width computes the same operations in the same order, so all give the same bits.
// A row's log softmax too (sum of exponentials, one pass out). Also exact square
// roots over arrays (Adam's √v), which a plain loop would not vectorise.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../core/config.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ATTN_VECTOR_DISPATCH 1
#define ATTN_ALWAYS_INLINE [[gnu::always_inline]] inline
#else
#define ATTN_VECTOR_DISPATCH 0
#define ATTN_ALWAYS_INLINE inline
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
// a·b + c must not become an FMA where one width has it and another not.
#pragma GCC optimize("fp-contract=off")
#endif

namespace attn::cpu_backend::vector_math {

/// The vector instruction sets the loops below are compiled for.
enum class isa { baseline, avx2, avx512 };

/// Whether this CPU runs `set`.
inline bool supports(isa set) {
#if ATTN_VECTOR_DISPATCH
  __builtin_cpu_init();
  switch (set) {
    case isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
    case isa::avx2: return __builtin_cpu_supports("avx2");
    case isa::baseline: return true;
  }
  return false;
#else
  return set == isa::baseline;
#endif
}

/// The widest set this CPU runs, asked once.
inline isa widest() {
  static const isa found = supports(isa::avx512) ? isa::avx512 : supports(isa::avx2) ? isa::avx2 : isa::baseline;
  return found;
}

namespace detail {

// exp(x) as Cephes' expf computes it (and Eigen's pexp): n = round(x·log₂e), r = x − n·ln 2 in
// two parts, a degree-6 polynomial for e^r, times 2ⁿ made in the exponent bits; 0 below −87.3
// (where 2ⁿ would leave the normal range), ∞ above 88.7, NaN for NaN; within 1 unit in the last
// place. In three steps, each its own loop over a block: fused into one, the compiler would see
// that a clamped input is a constant, branch to fold the polynomial for it, and not vectorise.

inline constexpr float exp_lowest = -87.33654f, exp_highest = 88.72283f;

/// x within [exp_lowest, exp_highest], NaN as 0 (exp_ends makes its result NaN again; a NaN
/// would otherwise reach a float-to-integer conversion). Quiet comparisons: no floating-point
/// exception for NaN, so the compiler may evaluate them all and select.
ATTN_ALWAYS_INLINE float exp_clamp(float x) {
  const float low = std::isless(x, exp_lowest) ? exp_lowest : x;
  const float within = std::isgreater(low, exp_highest) ? exp_highest : low;
  return std::isunordered(x, x) ? 0.0f : within;
}

/// exp(c) for c within [exp_lowest, exp_highest].
ATTN_ALWAYS_INLINE float exp_within(float c) {
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
  // Round to nearest by adding and removing 1.5·2²³ (valid for |v| < 2²²).
  const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2ⁿ for n in [−126, 128] as two factors, each a normal float: 2^⌊n/2⌋ · 2^(n − ⌊n/2⌋).
  const std::int32_t e = std::int32_t(n);
  const std::int32_t half = e >> 1;
  return p * std::bit_cast<float>((half + 127) << 23) * std::bit_cast<float>((e - half + 127) << 23);
}

/// exp(x) from y = exp_within(exp_clamp(x)): 0 below the range, ∞ above it, NaN for NaN, y
/// within. On the bits, with integer selects: the compiler vectorises those (a select feeding a
/// float product it would turn into branches).
ATTN_ALWAYS_INLINE float exp_ends(float x, float y) {
  const bool below = std::isless(x, exp_lowest), above = std::isgreater(x, exp_highest);
  const std::uint32_t keep = below || above ? 0u : ~0u;
  const std::uint32_t infinity = above ? 0x7f800000u : 0u;
  const std::uint32_t nan = std::isunordered(x, x) ? 0x7fc00000u : 0u;
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(y) & keep) | infinity | nan);
}

/// Lanes of the partial sums: a fixed number, so that the order of additions is the same
/// whatever the vector width.
inline constexpr index_t lanes = 16;
/// Numbers a block: exponentials go through a buffer of this many on the stack.
inline constexpr index_t block = 16 * lanes;

/// e[j] = exp(x[j]) for j < count ≤ block (e and x may be the same).
ATTN_ALWAYS_INLINE void exp_block(float* e, const float* x, index_t count) {
  float c[block];
  for (index_t j = 0; j < count; ++j) c[j] = exp_clamp(x[j]);
  for (index_t j = 0; j < count; ++j) c[j] = exp_within(c[j]);
  for (index_t j = 0; j < count; ++j) e[j] = exp_ends(x[j], c[j]);
}

/// partial[j] += x[i] for every i ≡ j (mod lanes), i < n, in increasing i.
ATTN_ALWAYS_INLINE void add_to_partials(float* partial, const float* x, index_t n) {
  index_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (index_t j = 0; j < lanes; ++j) partial[j] += x[i + j];
  for (index_t j = 0; i + j < n; ++j) partial[j] += x[i + j];
}

ATTN_ALWAYS_INLINE float sum_of_partials(const float* partial) {
  float total = 0;
  for (index_t j = 0; j < lanes; ++j) total += partial[j];
  return total;
}

ATTN_ALWAYS_INLINE float sum_exp_body(const float* x, index_t n) {
  float partial[lanes] = {};
  float e[block];
  for (index_t start = 0; start < n; start += block) {
    const index_t count = std::min(block, n - start);
    exp_block(e, x + start, count);
    add_to_partials(partial, e, count);
  }
  return sum_of_partials(partial);
}

ATTN_ALWAYS_INLINE float exp_and_sum_body(float* y, index_t n) {
  float partial[lanes] = {};
  for (index_t start = 0; start < n; start += block) {
    const index_t count = std::min(block, n - start);
    exp_block(y + start, y + start, count);
    add_to_partials(partial, y + start, count);
  }
  return sum_of_partials(partial);
}

/// y = x − m − log Σ exp(x − m) for m = `largest`: x − m rounded to float before its exp and
/// before the log is taken from it, as two passes over a stored x − m would; here one pass reads
/// x for the sum and one writes y.
ATTN_ALWAYS_INLINE void log_softmax_body(float* y, const float* x, index_t n, float largest) {
  float partial[lanes] = {};
  float e[block];
  for (index_t start = 0; start < n; start += block) {
    const index_t count = std::min(block, n - start);
    for (index_t j = 0; j < count; ++j) e[j] = x[start + j] - largest;
    exp_block(e, e, count);
    add_to_partials(partial, e, count);
  }
  const float log_sum = std::log(sum_of_partials(partial));
  for (index_t i = 0; i < n; ++i) y[i] = (x[i] - largest) - log_sum;
}

// One copy of each loop per instruction set; the bodies above are inlined into each and
// vectorised for it.
#if ATTN_VECTOR_DISPATCH
#define ATTN_AVX512 [[gnu::target("avx512f,avx512dq,avx512vl,avx2,avx,sse4.2")]]
#define ATTN_AVX2 [[gnu::target("avx2,avx,sse4.2")]]
ATTN_AVX512 inline float sum_exp_avx512(const float* x, index_t n) { return sum_exp_body(x, n); }
ATTN_AVX2 inline float sum_exp_avx2(const float* x, index_t n) { return sum_exp_body(x, n); }
ATTN_AVX512 inline float exp_and_sum_avx512(float* y, index_t n) { return exp_and_sum_body(y, n); }
ATTN_AVX2 inline float exp_and_sum_avx2(float* y, index_t n) { return exp_and_sum_body(y, n); }
ATTN_AVX512 inline void log_softmax_avx512(float* y, const float* x, index_t n, float largest) {
  log_softmax_body(y, x, n, largest);
}
ATTN_AVX2 inline void log_softmax_avx2(float* y, const float* x, index_t n, float largest) {
  log_softmax_body(y, x, n, largest);
}
#undef ATTN_AVX512
#undef ATTN_AVX2
#endif

}  // namespace detail

/// Σ exp(x[i]) for i < n, with the vectors of `set` (which this CPU must run): `lanes` partial
/// sums, each over every lanes-th number in order, then those in order.
inline float sum_exp(const float* x, index_t n, isa set = widest()) {
#if ATTN_VECTOR_DISPATCH
  if (set == isa::avx512) return detail::sum_exp_avx512(x, n);
  if (set == isa::avx2) return detail::sum_exp_avx2(x, n);
#endif
  (void)set;
  return detail::sum_exp_body(x, n);
}

/// y[i] = exp(y[i]) for i < n, and their sum as sum_exp adds.
inline float exp_and_sum(float* y, index_t n, isa set = widest()) {
#if ATTN_VECTOR_DISPATCH
  if (set == isa::avx512) return detail::exp_and_sum_avx512(y, n);
  if (set == isa::avx2) return detail::exp_and_sum_avx2(y, n);
#endif
  (void)set;
  return detail::exp_and_sum_body(y, n);
}

/// y[i] = x[i] − m − log Σ exp(x[j] − m) for i < n, m = `largest` (x's largest number, which
/// the caller finds: compilers leave a max over floats scalar; y and x may be the same): a row's
/// log softmax, with the sum as sum_exp adds.
inline void log_softmax(float* y, const float* x, index_t n, float largest, isa set = widest()) {
#if ATTN_VECTOR_DISPATCH
  if (set == isa::avx512) return detail::log_softmax_avx512(y, x, n, largest);
  if (set == isa::avx2) return detail::log_softmax_avx2(y, x, n, largest);
#endif
  (void)set;
  detail::log_softmax_body(y, x, n, largest);
}

/// out[i] = √x[i], correctly rounded (as std::sqrt), four or two at a time with SSE2's sqrtps and
/// sqrtpd, which x86-64 always has; a loop of std::sqrt is not vectorised, for it may set errno.
template <class T>
void exact_sqrt(T* out, const T* x, index_t n) {
  index_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
  } else if constexpr (std::is_same_v<T, double>) {
    for (; i + 2 <= n; i += 2) _mm_storeu_pd(out + i, _mm_sqrt_pd(_mm_loadu_pd(x + i)));
  }
#endif
  for (; i < n; ++i) out[i] = std::sqrt(x[i]);
}

}  // namespace attn::cpu_backend::vector_math

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
