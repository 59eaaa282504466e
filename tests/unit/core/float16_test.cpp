// 16-bit floats (include/attn/core/float16.hpp): every value survives the trip through float,
// every tie between two neighbours rounds to the even one and every number beside a tie to the
// nearer, and a sample of all floats converts as Eigen's own types convert them.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <attn/core/float16.hpp>
#include <attn/core/tensor.hpp>
#include <cmath>
#include <cstdint>
#include <limits>

namespace {
using namespace attn;

static_assert(sizeof(bfloat16) == 2 && sizeof(float16) == 2);
static_assert(std::is_trivially_copyable_v<bfloat16> && std::is_trivially_copyable_v<float16>);
static_assert(std::is_same_v<accumulate_t<bfloat16>, float> && std::is_same_v<accumulate_t<const float16>, float>);
static_assert(std::is_same_v<accumulate_t<double>, double> && std::is_same_v<accumulate_t<float>, float>);
static_assert(element<bfloat16> && element<float16>);

template <class H>
std::uint16_t bits_of(float x) {
  return H(x).bits;
}

template <class H>
void check_every_value_and_tie() {
  INFO((std::is_same_v<H, bfloat16> ? "bfloat16" : "float16"));
  int failures = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const H h = H::from_bits(std::uint16_t(b));
    const float x = h;
    if (std::isnan(x)) {  // NaN stays NaN
      if (!std::isnan(float(H(x)))) ++failures;
      continue;
    }
    if (H(x).bits != b) ++failures;  // exact on the way back
    // Between h and the next value away from zero: the tie goes to the even one, anything
    // nearer to one of them to that one. Signs are symmetric.
    const std::uint32_t next = b + 1;
    if ((b & 0x7FFF) == 0x7FFF || std::isinf(x)) continue;
    const float y = H::from_bits(std::uint16_t(next));
    if (std::isnan(y)) continue;
    const float tie = std::isinf(y) ? (std::is_same_v<H, float16> ? std::copysign(65520.0f, x)
                                                                   : std::copysign(std::ldexp(255.5f, 120), x))
                                    : x + (y - x) / 2;  // exact: one ulp of H, halved, in float
    const std::uint32_t even = (b & 1) ? next : b;
    if (bits_of<H>(tie) != even) ++failures;
    if (bits_of<H>(std::nextafter(tie, x)) != b) ++failures;
    if (bits_of<H>(std::nextafter(tie, y)) != next) ++failures;
  }
  CHECK(failures == 0);
}

TEST_CASE("float16: every bfloat16 and float16 value round-trips, and ties round to even") {
  check_every_value_and_tie<bfloat16>();
  check_every_value_and_tie<float16>();
}

TEST_CASE("float16: conversions from float agree with Eigen's bfloat16 and half on a sample of every float") {
  int bfloat16_differences = 0, float16_differences = 0;
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFu; b += 4093) {  // about a million floats of every binade
    float x;
    const auto bits = std::uint32_t(b);
    std::memcpy(&x, &bits, sizeof x);
    if (std::isnan(x)) continue;
    if (bfloat16(x).bits != Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(x))) ++bfloat16_differences;
    if (float16(x).bits != Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(x))) ++float16_differences;
  }
  CHECK(bfloat16_differences == 0);
  CHECK(float16_differences == 0);
}

TEST_CASE("float16: known values, limits and arithmetic through float") {
  CHECK(bfloat16(1.0f).bits == 0x3F80);
  CHECK(float16(1.0f).bits == 0x3C00);
  CHECK(bfloat16(0.1f).bits == 0x3DCD);
  CHECK(float16(0.1f).bits == 0x2E66);
  CHECK(float16(65504.0f).bits == 0x7BFF);
  CHECK(float16(65519.0f).bits == 0x7BFF);
  CHECK(float16(65520.0f).bits == 0x7C00);  // overflow: ∞
  CHECK(float16(-1e6f).bits == 0xFC00);
  CHECK(float(float16::from_bits(0x0001)) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(float16(std::ldexp(1.0f, -25)).bits == 0x0000);                // a tie with zero: even
  CHECK(float16(std::ldexp(1.5f, -25)).bits == 0x0001);
  CHECK(float16(-0.0f).bits == 0x8000);
  CHECK(bfloat16(std::numeric_limits<float>::infinity()).bits == 0x7F80);
  CHECK(std::isnan(float(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(float(float16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(bfloat16(3.0e38f).bits == 0x7F62);  // bfloat16 keeps float's range
  const bfloat16 a = 1.5f, b = 2.25f;
  CHECK(a + b == 3.75f);
  CHECK(float16(a * b) == float16(3.375f));
}

}  // namespace
