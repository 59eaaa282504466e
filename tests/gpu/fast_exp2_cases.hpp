// What fast_exp2 (cuda/attn/cuda/fast_exp2.cuh, ex2.approx.ftz.f32) must give, shared by the
// GPU's test (fast_exp2_test.cu) and the emulator's twin's (tests/unit/cuda/emulator_test.cpp):
// 2^x within 2 ulp where that is a normal float (CUDA documents 2 ulp for exp2f, this
// instruction with subnormal results kept), 0 where it is below the normal range, ∞ above
// float's range, NaN for NaN. In a thin band at each edge of the normal range either answer
// (flushed or close; infinite or close) will do.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace fast_exp2_cases {

/// Every 997th float pattern from −160 to 160, and the edges and special values.
inline std::vector<float> inputs() {
  std::vector<float> x;
  for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 997) {
    float f;
    const auto pattern = std::uint32_t(bits);
    std::memcpy(&f, &pattern, sizeof f);
    if (std::fabs(f) <= 160) x.push_back(f);
  }
  const float infinity = std::numeric_limits<float>::infinity();
  for (float f : {0.f, -0.f, 1.f, -1.f, 0.5f, -126.f, -126.5f, -127.f, -149.f, -150.f, 127.f, 127.99f, 128.f, infinity,
                  -infinity, std::numeric_limits<float>::quiet_NaN()})
    x.push_back(f);
  return x;
}

/// Empty where `power` is what fast_exp2(x) may give, else what is wrong.
inline std::string mistake(float x, float power) {
  const auto describe = [&] { return "2^" + std::to_string(x) + " gave " + std::to_string(power); };
  if (std::isnan(x)) return std::isnan(power) ? "" : describe() + ", not NaN";
  const double exact = std::exp2(double(x));
  const double smallest_normal = std::ldexp(1.0, -126), largest = double(std::numeric_limits<float>::max());
  const double edge = std::ldexp(1.0, -20);  // the band at each edge that may go either way
  const double ulp = std::ldexp(1.0, std::max(std::ilogb(exact), -126) - 23);
  const bool close = std::fabs(double(power) - exact) <= 2 * ulp;
  if (exact < smallest_normal * (1 - edge)) return power == 0 ? "" : describe() + ", not 0";
  if (exact > largest * (1 + edge)) return std::isinf(power) && power > 0 ? "" : describe() + ", not ∞";
  if (exact < smallest_normal * (1 + edge) && (power == 0 || close)) return "";  // flushed or not
  if (exact > largest * (1 - edge) && ((std::isinf(power) && power > 0) || close)) return "";  // overflowed or not
  return close ? "" : describe() + " (" + std::to_string(exact) + "), beyond 2 ulp";
}

}  // namespace fast_exp2_cases
