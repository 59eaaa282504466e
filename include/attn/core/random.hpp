// A counter-based random stream: the n-th number depends only on the seed and n, so results
// are the same for any thread count and a stream is saved and restored as two integers.
#pragma once

#include <cstdint>

#include "config.hpp"

namespace attn {

/// Seeded stream of uniform numbers in [0, 1). `take(n)` reserves the next n numbers and
/// returns where they start; `uniform(start + i)` is the i-th of them, from any thread.
class random_stream {
 public:
  explicit random_stream(std::uint64_t seed = 0, std::uint64_t position = 0)
      : seed_(seed), position_(position) {}

  std::uint64_t seed() const noexcept { return seed_; }
  /// How many numbers have been taken: with the seed, the whole state.
  std::uint64_t position() const noexcept { return position_; }

  std::uint64_t take(std::uint64_t count) noexcept {
    const std::uint64_t start = position_;
    position_ += count;
    return start;
  }

  /// 64 random bits for counter n: SplitMix64's finaliser over the seeded counter.
  ATTN_HOST_DEVICE std::uint64_t bits(std::uint64_t n) const noexcept {
    std::uint64_t z = seed_ * 0x9e3779b97f4a7c15ULL + n + 0x632be59bd9b4e019ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  /// Uniform in [0, 1) with 53 random bits.
  ATTN_HOST_DEVICE double uniform(std::uint64_t n) const noexcept {
    return static_cast<double>(bits(n) >> 11) * 0x1.0p-53;
  }

 private:
  std::uint64_t seed_;
  std::uint64_t position_;
};

}  // namespace attn
