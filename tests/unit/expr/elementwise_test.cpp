// Tests of include/attn/expr/elementwise.hpp (lowered by include/attn/cpu): every unary and
// binary function, scalar operands, comparisons, select and cast, against plain loops.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>

#include "../reference.hpp"

namespace {
using namespace attn::test;
using batch = attn::dim<"batch">;
using len = attn::dim<"len">;
using d_small = attn::dim<"d_small", 5>;
using s3 = attn::shape<batch, len, d_small>;

template <class T>
attn::tensor<T, s3> random_tensor(attn::index_t b, attn::index_t l, double low = -1, double high = 1) {
  attn::tensor<T, s3> t(b, l);
  fill_random(t, low, high);
  return t;
}

/// Checks out[i] == f(a[i]) (and g for binary) within a relative tolerance.
template <class Out, class F>
void check_each(const Out& out, F&& reference_of_index, double tolerance) {
  std::vector<double> ref;
  for (attn::index_t i = 0; i < out.size(); ++i) ref.push_back(reference_of_index(i));
  CHECK(relative_error(out.data(), ref) <= tolerance);
}
}  // namespace

TEST_CASE_TEMPLATE("unary functions match the standard library on random shapes", T, float, double) {
  const double tolerance = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  for (int draw = 0; draw < 4; ++draw) {
    const auto b = random_extent(), l = random_extent();
    CAPTURE(b);
    CAPTURE(l);
    auto x = random_tensor<T>(b, l);
    auto pos = random_tensor<T>(b, l, 0.1, 3.0);
    auto at = [](const auto& t, attn::index_t i) { return static_cast<double>(t.data()[i]); };
    check_each(attn::eval(attn::exp(x)), [&](auto i) { return std::exp(at(x, i)); }, tolerance);
    check_each(attn::eval(attn::log(pos)), [&](auto i) { return std::log(at(pos, i)); }, tolerance);
    check_each(attn::eval(attn::sqrt(pos)), [&](auto i) { return std::sqrt(at(pos, i)); }, tolerance);
    check_each(attn::eval(attn::rsqrt(pos)), [&](auto i) { return 1 / std::sqrt(at(pos, i)); },
               std::is_same_v<T, float> ? 1e-5 : 1e-14);
    check_each(attn::eval(attn::tanh(x)), [&](auto i) { return std::tanh(at(x, i)); }, tolerance);
    check_each(attn::eval(attn::abs(x)), [&](auto i) { return std::abs(at(x, i)); }, 0);
    check_each(attn::eval(attn::relu(x)), [&](auto i) { return std::max(0.0, at(x, i)); }, 0);
    check_each(attn::eval(-x), [&](auto i) { return -at(x, i); }, 0);
  }
}

TEST_CASE_TEMPLATE("abs in kernels (op::abs) agrees with the CPU's at signed zeros and infinities", T, float,
                   double) {
  // A GPU kernel evaluates op::abs, the CPU's lowering Eigen's abs: the two must agree to the
  // bit, −0 included (its sign reaches a score through s − m·|i − j|).
  using limits = std::numeric_limits<T>;
  attn::tensor<T, s3> x(1, 1);
  const T values[] = {T(-0.0), T(0.0), T(-2.5), T(3), -limits::infinity()};
  std::copy(std::begin(values), std::end(values), x.data());
  const auto cpu = attn::eval(attn::abs(x));
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    const T kernel = attn::op::abs{}(x.data()[i]);
    CHECK(kernel == cpu.data()[i]);
    CHECK(std::signbit(kernel) == std::signbit(cpu.data()[i]));
    CHECK_FALSE(std::signbit(kernel));
  }
  for (const T v : {limits::infinity(), -limits::infinity()}) CHECK(attn::op::abs{}(v) == limits::infinity());
  CHECK(std::isnan(attn::op::abs{}(limits::quiet_NaN())));  // and NaN stays NaN
  // Integers compare and negate.
  CHECK(attn::op::abs{}(-7) == 7);
  CHECK(attn::op::abs{}(std::int64_t{-7}) == 7);
}

TEST_CASE_TEMPLATE("binary functions and operators, with scalars on either side", T, float, double) {
  for (int draw = 0; draw < 4; ++draw) {
    const auto b = random_extent(), l = random_extent();
    auto x = random_tensor<T>(b, l);
    auto y = random_tensor<T>(b, l, 0.5, 2.0);
    auto X = [&](attn::index_t i) { return static_cast<double>(x.data()[i]); };
    auto Y = [&](attn::index_t i) { return static_cast<double>(y.data()[i]); };
    const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-15;
    check_each(attn::eval(x + y), [&](auto i) { return X(i) + Y(i); }, tol);
    check_each(attn::eval(x - y), [&](auto i) { return X(i) - Y(i); }, tol);
    check_each(attn::eval(x * y), [&](auto i) { return X(i) * Y(i); }, tol);
    check_each(attn::eval(x / y), [&](auto i) { return X(i) / Y(i); }, tol);
    check_each(attn::eval(attn::max(x, y)), [&](auto i) { return std::max(X(i), Y(i)); }, 0);
    check_each(attn::eval(attn::min(x, y)), [&](auto i) { return std::min(X(i), Y(i)); }, 0);
    check_each(attn::eval(x + 2), [&](auto i) { return X(i) + 2; }, tol);
    check_each(attn::eval(3.0 - x), [&](auto i) { return 3 - X(i); }, tol);
    check_each(attn::eval(x * 0.5f), [&](auto i) { return X(i) * 0.5; }, tol);
    check_each(attn::eval(1 / y), [&](auto i) { return 1 / Y(i); }, tol);
    check_each(attn::eval(attn::max(x, 0)), [&](auto i) { return std::max(X(i), 0.0); }, 0);
    check_each(attn::eval(attn::min(0.25, x)), [&](auto i) { return std::min(X(i), 0.25); }, tol);
  }
}

TEST_CASE("comparisons give bool tensors; where selects; cast converts") {
  auto x = random_tensor<float>(3, 7);
  auto y = random_tensor<float>(3, 7);
  auto less = attn::eval(x < y);
  static_assert(std::is_same_v<decltype(less)::value_type, bool>);
  for (attn::index_t i = 0; i < x.size(); ++i) {
    const float a = x.data()[i], b = y.data()[i];
    CHECK(less.data()[i] == (a < b));
  }
  auto checks = [&](auto&& e, auto&& f) {
    auto r = attn::eval(e);
    for (attn::index_t i = 0; i < x.size(); ++i) CHECK(r.data()[i] == f(x.data()[i], y.data()[i]));
  };
  checks(x <= y, [](float a, float b) { return a <= b; });
  checks(x > y, [](float a, float b) { return a > b; });
  checks(x >= 0.0f, [](float a, float) { return a >= 0.0f; });
  checks(x == x, [](float, float) { return true; });
  checks(x != y, [](float a, float b) { return a != b; });
  checks(attn::where(x > y, x, y), [](float a, float b) { return a > b ? a : b; });
  checks(attn::where(x > 0.0f, x, -1.0f), [](float a, float) { return a > 0 ? a : -1.0f; });
  checks(attn::where(x > 0.0f, 2.0f, y), [](float a, float b) { return a > 0 ? 2.0f : b; });
  checks(attn::where(x > 0.0f, 1.0f, 0.0f), [](float a, float) { return a > 0 ? 1.0f : 0.0f; });
  auto mask = attn::eval(attn::cast<float>(x > y));
  static_assert(std::is_same_v<decltype(mask)::value_type, float>);
  for (attn::index_t i = 0; i < x.size(); ++i)
    CHECK(mask.data()[i] == (x.data()[i] > y.data()[i] ? 1.0f : 0.0f));
  auto widened = attn::eval(attn::cast<double>(x));
  static_assert(std::is_same_v<decltype(widened)::value_type, double>);
  CHECK(widened.data()[5] == static_cast<double>(x.data()[5]));
}

TEST_CASE("a deep tree evaluates in one assignment and matches the loop") {
  auto a = random_tensor<float>(17, 13);
  auto b = random_tensor<float>(17, 13, 0.5, 1.5);
  auto c = random_tensor<float>(17, 13);
  attn::tensor<float, s3> out(17, 13);
  out = attn::relu(a * b + c) * 0.5f + attn::exp(-a) / attn::sqrt(b) - attn::tanh(c * c);
  check_each(out, [&](attn::index_t i) {
    const double x = a.data()[i], y = b.data()[i], z = c.data()[i];
    return std::max(0.0, x * y + z) * 0.5 + std::exp(-x) / std::sqrt(y) - std::tanh(z * z);
  }, 1e-6);
}

TEST_CASE("large elementwise expressions are split across threads and stay correct") {
  using big = attn::dim<"big">;
  attn::tensor<float, attn::shape<big>> x(1 << 20), y(1 << 20);
  fill_random(x);
  x = x;  // self-assignment of a plain expression is safe
  y = x * 3.0f + 1.0f;
  std::vector<double> ref;
  for (attn::index_t i = 0; i < x.size(); ++i) ref.push_back(x.data()[i] * 3.0 + 1.0);
  CHECK(relative_error(y.data(), ref) < 1e-7);
  y = y * 2.0f;  // in place
  for (auto& r : ref) r *= 2;
  CHECK(relative_error(y.data(), ref) < 1e-7);
}

TEST_CASE("building an expression computes nothing; operands are held by view") {
  auto x = random_tensor<float>(2, 3);
  auto e = x * 2.0f;
  x.data()[0] = 10.0f;  // changed after building, before evaluating
  CHECK(attn::eval(e).data()[0] == 20.0f);
  static_assert(std::is_same_v<decltype(e)::shape_type, s3>);
  static_assert(attn::expression<decltype(e)>);
}

TEST_CASE("operands whose shared dynamic dimension disagrees are rejected at run time") {
  auto x = random_tensor<float>(2, 3);
  auto y = random_tensor<float>(2, 4);
  try {
    (void)(x + y);
    FAIL("no error");
  } catch (const attn::extent_error& e) {
    CHECK(std::string(e.what()) ==
          "attn::elementwise: dimension 'len' has extent 3 in one operand and 4 in the other");
  }
  attn::tensor<float, s3> out(2, 4);
  CHECK_THROWS_AS(out = x * 2.0f, attn::extent_error);
}
