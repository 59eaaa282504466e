// Tests of include/attn/cpu/vector_math.hpp: exp within a unit in the last place of the exact
// value over float's whole range, its ends (underflow to 0, ∞, NaN), sums against a double
// reference, every vector width this CPU runs giving the bits of the baseline loop, a row's log
// softmax, and exact square roots.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <attn/cpu/vector_math.hpp>

#include "../reference.hpp"

namespace {
namespace vm = attn::cpu_backend::vector_math;
using attn::index_t;

/// Units in the last place between a float and an exact value.
double ulps(float got, double exact) {
  const float rounded = float(exact);
  const double unit = double(std::nextafter(rounded, std::numeric_limits<float>::infinity())) - double(rounded);
  return std::abs(double(got) - exact) / unit;
}

/// exp of every value through exp_and_sum, one at a time.
float exp_of(float x, vm::isa set = vm::isa::baseline) {
  vm::exp_and_sum(&x, 1, set);
  return x;
}

std::vector<vm::isa> supported_sets() {
  std::vector<vm::isa> sets;
  for (const auto set : {vm::isa::baseline, vm::isa::avx2, vm::isa::avx512})
    if (vm::supports(set)) sets.push_back(set);
  return sets;
}
}  // namespace

TEST_CASE("vector exp: within one unit in the last place wherever exp is a normal float") {
  // Every 97th float from the smallest normal result to the largest finite one.
  std::vector<float> xs;
  for (std::uint32_t bits = 0; bits < 0x80000000u; bits += 97 * 4096) {
    for (const float sign : {1.0f, -1.0f}) {
      const float x = sign * std::bit_cast<float>(bits);
      if (x > -87.3f && x < 88.7f) xs.push_back(x);
    }
  }
  REQUIRE(xs.size() > 1000);
  std::vector<float> ys = xs;
  vm::exp_and_sum(ys.data(), index_t(ys.size()), vm::isa::baseline);
  double worst = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) worst = std::max(worst, ulps(ys[i], std::exp(double(xs[i]))));
  CHECK(worst <= 1.0);
  CHECK(exp_of(0.0f) == 1.0f);
}

TEST_CASE("vector exp: the ends of the range, infinities and NaN") {
  CHECK(exp_of(-87.4f) == 0.0f);
  CHECK(exp_of(-1e9f) == 0.0f);  // a masked score
  CHECK(exp_of(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(exp_of(88.8f) == std::numeric_limits<float>::infinity());
  CHECK(exp_of(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(exp_of(std::numeric_limits<float>::quiet_NaN())));
  CHECK(ulps(exp_of(88.7f), std::exp(double(88.7f))) <= 1.0);  // 2¹²⁸ made of two factors
  CHECK(exp_of(-87.3f) > 0.0f);
}

TEST_CASE("vector exp: sums against double, and every width this CPU runs gives the baseline's bits") {
  const auto sets = supported_sets();
  MESSAGE("vector widths run here: " << sets.size() << " of 3 (baseline, AVX2, AVX-512)");
  for (const index_t n : {0, 1, 15, 16, 17, 255, 256, 257, 4003}) {
    CAPTURE(n);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = float(std::uniform_real_distribution<double>(-30.0, 5.0)(attn::test::rng()));
    if (n > 3) x[1] = -1e9f;  // a masked entry adds nothing
    double exact = 0;
    for (const float v : x) exact += std::exp(double(v));

    std::vector<float> baseline = x;
    const float total = vm::exp_and_sum(baseline.data(), n, vm::isa::baseline);
    CHECK(std::abs(double(total) - exact) <= 1e-6 * exact);
    CHECK(vm::sum_exp(x.data(), n, vm::isa::baseline) == total);
    for (const auto set : sets) {
      CAPTURE(int(set));
      std::vector<float> y = x;
      CHECK(vm::exp_and_sum(y.data(), n, set) == total);
      CHECK(vm::sum_exp(x.data(), n, set) == total);
      CHECK(y == baseline);
    }
  }
}

TEST_CASE("log_softmax: the bits of x − max stored, sum_exp and a subtraction; near double; every width the same") {
  const auto sets = supported_sets();
  for (const index_t n : {1, 2, 15, 16, 17, 255, 256, 257, 4003}) {
    CAPTURE(n);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = float(std::uniform_real_distribution<double>(-30.0, 5.0)(attn::test::rng()));
    if (n > 3) x[1] = -std::numeric_limits<float>::infinity();  // a masked entry: -inf out, adds nothing
    if (n > 40) x[n - 3] = 6.0f;  // the largest, late in the row
    // The three passes log_softmax replaces.
    float largest = x[0];
    for (const float v : x) largest = std::max(largest, v);
    std::vector<float> expected(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) expected[i] = x[i] - largest;
    const float log_sum = std::log(vm::sum_exp(expected.data(), n, vm::isa::baseline));
    for (auto& v : expected) v -= log_sum;
    double exact_sum = 0;
    for (const float v : x) exact_sum += std::exp(double(v) - double(largest));
    for (const auto set : sets) {
      CAPTURE(int(set));
      std::vector<float> y(x.size());
      vm::log_softmax(y.data(), x.data(), n, largest, set);
      CHECK(y == expected);
      double worst = 0;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (std::isfinite(x[i]))
          worst = std::max(worst, std::abs(double(y[i]) - (double(x[i]) - double(largest) - std::log(exact_sum))));
      CHECK(worst < 1e-5);
      std::vector<float> in_place = x;
      vm::log_softmax(in_place.data(), in_place.data(), n, largest, set);
      CHECK(in_place == expected);
    }
  }
  // A NaN anywhere makes the row NaN.
  std::vector<float> x = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f}, y(3);
  for (const auto set : sets) {
    vm::log_softmax(y.data(), x.data(), 3, 2.0f, set);
    for (const float v : y) CHECK(std::isnan(v));
  }
}

TEST_CASE_TEMPLATE("exact_sqrt: std::sqrt's bits, at every length around the vector width", T, float, double) {
  for (const index_t n : {0, 1, 2, 3, 4, 5, 7, 8, 9, 2048}) {
    CAPTURE(n);
    std::vector<T> x(static_cast<std::size_t>(n)), root(x.size());
    for (auto& v : x) v = T(std::uniform_real_distribution<double>(0.0, 1e3)(attn::test::rng()));
    if (n > 2) x[2] = T(0);
    vm::exact_sqrt(root.data(), x.data(), n);
    bool same = true;
    for (std::size_t i = 0; i < x.size(); ++i) same = same && root[i] == std::sqrt(x[i]);
    CHECK(same);
  }
}
