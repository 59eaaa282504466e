// grad::map (include/attn/grad/map.hpp) and the derivatives it reads off expressions
// (include/attn/expr/derivative.hpp): finite-difference checks in double of functions that
// use every rule, inputs broadcast inside the function, and coordinates.
#include <doctest/doctest.h>

#include <attn/attn.hpp>

#include "gradcheck.hpp"

namespace {
using namespace attn;
using batch = dim<"batch">;
using heads = dim<"heads">;
using queries = dim<"queries">;
using keys = dim<"keys">;
using S = shape<batch, queries, keys>;

constexpr double tolerance = 1e-6;

template <class LossOf>
void expect_gradients(LossOf&& loss_of, const std::vector<test::gradient_target>& targets) {
  const auto report = test::check_gradients(loss_of, targets, 40);
  INFO(report.where);
  CHECK(report.worst < tolerance);
  CHECK(report.checked > 0);
}
}  // namespace

TEST_CASE("grad::map: unary rules (exp, log, sqrt, rsqrt, tanh, abs, relu, negate) pass gradient checks") {
  auto x = test::random_input<S>(2, 3, 4);
  tensor<double, S> positive(2, 3, 4);
  test::fill_random(positive, 0.5, 2.0);
  grad::variable<double, S> p(std::move(positive), true);
  const auto r = test::random_like(x);
  auto loss_of = [&](grad::tape* t) {
    const auto y = grad::map(
        t,
        [](const auto& a, const auto& b) {
          return exp(a) * 0.5 + log(b) - sqrt(b) * tanh(a) + rsqrt(b) + abs(a) * relu(a - 0.25) - (-a);
        },
        x, p);
    return test::weighted_sum(t, y, r);
  };
  expect_gradients(loss_of, {test::target("x", x), test::target("p", p)});
}

TEST_CASE("grad::map: binary rules and where pass gradient checks") {
  auto a = test::random_input<S>(3, 2, 5);
  auto b = test::random_input<S>(3, 2, 5);
  const auto r = test::random_like(a);
  auto loss_of = [&](grad::tape* t) {
    const auto y = grad::map(
        t,
        [](const auto& u, const auto& v) {
          return u * v - u / (v * v + 1.0) + max(u, v) * 2.0 - min(u, v * 0.5) + where(u > v, u * u, v);
        },
        a, b);
    return test::weighted_sum(t, y, r);
  };
  expect_gradients(loss_of, {test::target("a", a), test::target("b", b)});
}

TEST_CASE("grad::map: a broadcast input gets the gradient summed over where it was repeated (ALiBi's slopes)") {
  using scores_shape = shape<batch, heads, queries, keys>;
  auto scores = test::random_input<scores_shape>(2, 3, 4, 5);
  auto slopes = test::random_input<shape<heads>>(3);
  auto gain = test::random_input<shape<batch, keys>>(2, 5);
  const auto r = test::random_like(scores);
  auto loss_of = [&](grad::tape* t) {
    const auto y = grad::map(
        t,
        [](const auto& s, const auto& m, const auto& g) {
          const auto distance = abs(index_along<queries>(s, 2.0) - index_along<keys>(s));
          return s * broadcast_like(g, s) - broadcast_like(m, s) * distance;
        },
        scores, slopes, gain);
    return test::weighted_sum(t, y, r);
  };
  expect_gradients(loss_of, {test::target("scores", scores), test::target("slopes", slopes),
                             test::target("gain", gain)});

  // And by hand: ∂L/∂slope_h = −Σ r·|i + 2 − j| over the head's scores.
  grad::tape tape;
  slopes.clear_grad();
  grad::backward(tape, loss_of(&tape));
  for (index_t h = 0; h < 3; ++h) {
    double expected = 0;
    for (index_t b = 0; b < 2; ++b)
      for (index_t q = 0; q < 4; ++q)
        for (index_t k = 0; k < 5; ++k) expected -= r(b, h, q, k) * std::fabs(double(q + 2 - k));
    CHECK(slopes.grad()(h) == doctest::Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("grad::map: an input the function does not differentiate through gets no gradient, and a constant input costs nothing") {
  auto x = test::random_input<S>(2, 2, 2);
  auto mask = test::random_input<S>(2, 2, 2);
  grad::tape tape;
  const auto y = grad::map(&tape, [](const auto& a, const auto& m) { return where(m > 0.0, a, -1.0); }, x, mask);
  static_assert(std::is_same_v<decltype(derivative<1>(where(input<1>(mask.value()) > 0.0, input<0>(x.value()), -1.0))),
                               expr::zero>);
  grad::backward(tape, test::weighted_sum(&tape, y, test::random_like(y)));
  CHECK(x.has_grad());
  CHECK_FALSE(mask.has_grad());  // compared, never differentiated
  for (index_t i = 0; i < 8; ++i)
    if (mask.value().data()[i] <= 0) CHECK(x.grad().data()[i] == 0.0);
}
