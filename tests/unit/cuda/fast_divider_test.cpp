// fast_divider (cuda/attn/cuda/fast_divider.cuh) against the division operator, and the index
// maps (index_map.cuh) with 32-bit indices, which use it, against their 64-bit form, which
// divides. The device takes the product's high half with __umulhi, the host in 64 bits: the
// same number.
#include <attn/cuda/emulator.hpp>  // first: the device code below is compiled for it

#include <attn/cuda/index_map.cuh>
#include <attn/cuda/fast_divider.cuh>

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using attn::index_t;
using attn::cuda_backend::fast_divider;

void check_divisor(std::uint64_t d, std::mt19937_64& random) {
  const fast_divider divide(d);
  std::vector<std::uint32_t> dividends{0, 1, 2, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
  for (std::uint64_t k : {std::uint64_t(1), std::uint64_t(2), std::uint64_t(3), std::uint64_t(1000), 0xffffffffu / d})
    for (std::int64_t offset : {-1, 0, 1}) {
      const std::int64_t n = std::int64_t(k * d) + offset;
      if (n >= 0 && n <= 0xffffffffll) dividends.push_back(std::uint32_t(n));
    }
  for (int i = 0; i < 200; ++i) dividends.push_back(std::uint32_t(random()));
  for (const std::uint32_t n : dividends) {
    const std::uint32_t q = divide.quotient(n);
    if (q != n / d || divide.remainder(n, q) != n % d) {
      FAIL_CHECK(n << " / " << d << ": " << q << " remainder " << divide.remainder(n, q) << ", expected " << n / d
                    << " remainder " << n % d);
      return;
    }
  }
}

TEST_CASE("fast_divider: quotient and remainder of every kind of 32-bit dividend and divisor") {
  std::mt19937_64 random(11);
  for (std::uint64_t d = 1; d <= 4096; ++d) check_divisor(d, random);
  for (int bit = 12; bit < 32; ++bit)
    for (std::int64_t offset : {-1, 0, 1}) check_divisor(std::uint64_t((std::int64_t(1) << bit) + offset), random);
  check_divisor(0xffffffffu, random);
  for (int i = 0; i < 2000; ++i) check_divisor(1 + random() % 0xffffffffu, random);
  for (int i = 0; i < 2000; ++i) check_divisor(1 + random() % 100000, random);  // the sizes of tensors
  CHECK_THROWS_AS(fast_divider(0), std::invalid_argument);
  CHECK_THROWS_AS(fast_divider(std::uint64_t(1) << 32), std::invalid_argument);
}

TEST_CASE("index_map and slice_map: 32-bit indices (multiplying) map as 64-bit ones (dividing)") {
  using map = attn::cuda_backend::index_map<4>;
  std::mt19937_64 random(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::array<index_t, 4> sizes{}, strides{};
    index_t count = 1;
    for (int r = 0; r < 4; ++r) {
      sizes[r] = 1 + index_t(random() % 7);
      strides[r] = index_t(random() % 50);  // 0: a broadcast dimension
      count *= sizes[r];
    }
    const map m = map::make(sizes, strides);
    for (index_t i = 0; i < count; ++i)
      REQUIRE(std::uint64_t(m(std::uint32_t(i))) == std::uint64_t(m(std::int64_t(i))));
  }
  // A dimension past 2¹⁶ and indices near 2³¹: the products of quotient and divisor stay exact.
  const map wide = map::make({3, 70000, 10000, 1}, {1, 30000, 1, 0});
  for (const std::uint32_t i : {0u, 1u, 69999u, 70000u, 700000000u, 2099999999u})
    CHECK(std::uint64_t(wide(i)) == std::uint64_t(wide(std::int64_t(i))));
  // A slice of a third of its operand's rows: indices whose operand's index stays under 2³¹, as
  // the generated kernel's 32-bit indices do.
  for (index_t block : {1, 3, 64, 1000, 65537}) {
    const attn::cuda_backend::slice_map slice{block, block * 3, block / 2, fast_divider(std::uint64_t(block))};
    for (const std::uint32_t i : {0u, 1u, std::uint32_t(block - 1), std::uint32_t(block), 123456u, 700000000u})
      CHECK(std::uint64_t(slice(i)) == std::uint64_t(slice(std::int64_t(i))));
  }
}

}  // namespace
