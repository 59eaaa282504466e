// Division of 32-bit indices by a divisor fixed on the host, as a multiply-high, an add and a
// shift (Granlund and Montgomery, "Division by invariant integers using multiplication", 1994,
// section 4, the round-up method; PyTorch's IntDivider and CUTLASS's FastDivmod do the same).
// A GPU has no integer divider: `i / d` on 32 bits is some twenty instructions, on 64 bits a
// call of about a hundred. The plans of broadcasts, permutes and slices divide a linear index
// once for each dimension they take apart, at every element, and a fused attention kernel's
// score modification at every score.
#pragma once

#include <cstdint>
#include <stdexcept>

namespace attn::cuda_backend {

/// n / divisor and n % divisor for every 32-bit unsigned n, divisor in [1, 2³²).
struct fast_divider {
  std::uint32_t divisor = 1;
  std::uint32_t magic = 1;  // ⌊2³² (2^shift − divisor) / divisor⌋ + 1: 1 for the divisor 1
  std::uint32_t shift = 0;  // ⌈log₂ divisor⌉

  fast_divider() = default;
  explicit fast_divider(std::uint64_t d) {
    if (d == 0 || d > 0xffffffffu) throw std::invalid_argument("attn::cuda_backend::fast_divider: divisor out of [1, 2^32)");
    *this = of(std::uint32_t(d));
  }
  /// The divider of d ≥ 1, unchecked: for a divisor that a kernel computes (its one 64-bit
  /// division, once, then a multiply-high at each use).
  __host__ __device__ static fast_divider of(std::uint32_t d) {
    fast_divider f;
    f.divisor = d;
    while (f.shift < 32 && (std::uint64_t(1) << f.shift) < d) ++f.shift;
    f.magic = std::uint32_t((((std::uint64_t(1) << f.shift) - d) << 32) / d + 1);  // 2^shift − d < 2³¹
    return f;
  }

  __host__ __device__ std::uint32_t quotient(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const std::uint32_t high = __umulhi(n, magic);
#else
    const auto high = std::uint32_t((std::uint64_t(n) * magic) >> 32);
#endif
    return std::uint32_t((std::uint64_t(high) + n) >> shift);  // in 64 bits: high + n may pass 2³²
  }
  __host__ __device__ std::uint32_t remainder(std::uint32_t n, std::uint32_t q) const { return n - q * divisor; }
};

}  // namespace attn::cuda_backend
