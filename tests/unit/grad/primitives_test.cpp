// Gradient checks of every differentiable primitive against central differences (double),
// and their forward values against plain loops.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <attn/grad.hpp>
#include <attn/train/loss.hpp>

#include "gradcheck.hpp"

namespace {

using namespace attn;
using test::check_gradients;
using test::random_input;
using test::target;

using B = dim<"batch">;
using L = dim<"len">;
using K = dim<"keys">;
using D = dim<"d", 6>;
using F = dim<"f", 5>;
using H = dim<"heads", 2>;
using DH = dim<"d_head", 3>;
using V = dim<"vocab">;

template <class S>
grad::parameter<double, S> random_parameter(const extents<S>& sizes = {}) {
  grad::parameter<double, S> p(sizes);
  test::fill_random(p.value());
  return p;
}

constexpr double tolerance = 1e-7;

}  // namespace

TEST_CASE("grad: add, scale, relu and add_broadcast pass gradient checks") {
  auto a = random_input<shape<B, L, D>>(2, 3);
  auto b = random_input<shape<B, L, D>>(2, 3);
  auto p = random_input<shape<L, D>>(3);
  const auto r = test::random_like(a);
  auto loss_of = [&](grad::tape* t) {
    auto sum = grad::add(t, a, grad::scale(t, b, 0.7));
    auto positioned = grad::add_broadcast<B>(t, grad::relu(t, sum), p);
    return test::weighted_sum(t, positioned, r);
  };
  const auto report = check_gradients(loss_of, {target("a", a), target("b", b), target("p", p)});
  INFO(report.where);
  CHECK(report.worst < tolerance);
  CHECK(report.checked == 36 + 36 + 18);
}

TEST_CASE("grad: linear and project_rows pass gradient checks") {
  auto x = random_input<shape<B, L, D>>(3, 2);
  auto w = random_parameter<shape<D, F>>();
  auto bias = random_parameter<shape<F>>();
  auto table = random_parameter<shape<V, F>>(extents<shape<V, F>>(7));
  tensor<double, shape<B, L, V>> r(3, 2, 7);
  test::fill_random(r);
  auto loss_of = [&](grad::tape* t) {
    return test::weighted_sum(t, grad::project_rows(t, grad::linear(t, x, w, bias), table), r);
  };
  const auto report =
      check_gradients(loss_of, {target("x", x), target("w", w), target("bias", bias), target("table", table)});
  INFO(report.where);
  CHECK(report.worst < tolerance);

  // Forward against a plain loop.
  const auto y = grad::linear(nullptr, x, w, bias);
  const auto ref = test::reference(y.extents(), [&](const auto& i) {
    double s = bias.value()(i[2]);
    for (index_t c = 0; c < D::extent; ++c) s += x.value()(i[0], i[1], c) * w.value()(c, i[2]);
    return s;
  });
  CHECK(test::relative_error(y.value().data(), ref) < 1e-14);
}

TEST_CASE("grad: heads split and merge, products and masked softmax pass gradient checks") {
  using W = dim<"width", 6>;  // heads × d_head
  auto x = random_input<shape<B, L, W>>(2, 3);
  auto m = random_input<shape<B, K, W>>(2, 4);
  tensor<double, shape<B, L, K>> mask(2, 3, 4);
  mask(0, 1, 3) = -1e9;  // one forbidden key
  mask(1, 0, 0) = -1e9;
  tensor<double, shape<B, L, W>> r(2, 3);
  test::fill_random(r);
  auto loss_of = [&](grad::tape* t) {
    auto q = grad::split_heads<H, DH, L>(t, x);
    auto k = grad::split_heads<H, DH, K>(t, m);
    auto scores = grad::product<DH>(t, q, k);                 // [B, H, L, K]
    auto weights = grad::softmax<K>(t, scores, 0.6, mask);
    auto out = grad::product<K>(t, weights, k);               // [B, H, L, DH]
    return test::weighted_sum(t, grad::merge_heads<W>(t, out), r);
  };
  const auto report = check_gradients(loss_of, {target("x", x), target("m", m)});
  INFO(report.where);
  CHECK(report.worst < tolerance);
}

TEST_CASE("grad: softmax rows sum to one and forbidden keys get no weight") {
  auto s = random_input<shape<B, L, K>>(2, 3, 5);
  tensor<double, shape<B, L, K>> mask(2, 3, 5);
  mask(1, 2, 4) = -1e9;
  const auto y = grad::softmax<K>(nullptr, s, 1.0, mask);
  for (index_t b = 0; b < 2; ++b)
    for (index_t i = 0; i < 3; ++i) {
      double total = 0;
      for (index_t j = 0; j < 5; ++j) total += y.value()(b, i, j);
      CHECK(total == doctest::Approx(1.0).epsilon(1e-14));
    }
  // Eigen's vectorised exp clamps its argument at the bottom of the range, so a masked key
  // gets the smallest subnormal-range weight rather than 0: below anything a sum can register.
  CHECK(y.value()(1L, 2L, 4L) < 1e-300);

  auto plain = random_input<shape<B, L, K>>(2, 3, 5);
  const auto r = test::random_like(plain);
  const auto report = check_gradients(
      [&](grad::tape* t) { return test::weighted_sum(t, grad::softmax<K>(t, plain, 1.3), r); }, {target("s", plain)});
  CHECK(report.worst < tolerance);
}

TEST_CASE("grad: layer_norm matches the formula and passes gradient checks") {
  auto x = random_input<shape<B, L, D>>(2, 3);
  auto gain = random_parameter<shape<D>>();
  auto bias = random_parameter<shape<D>>();
  const auto y = grad::layer_norm(nullptr, x, gain, bias, 1e-6);
  const auto ref = test::reference(y.extents(), [&](const auto& i) {
    double mean = 0, var = 0;
    for (index_t c = 0; c < D::extent; ++c) mean += x.value()(i[0], i[1], c) / D::extent;
    for (index_t c = 0; c < D::extent; ++c) var += std::pow(x.value()(i[0], i[1], c) - mean, 2) / D::extent;
    return (x.value()(i[0], i[1], i[2]) - mean) / std::sqrt(var + 1e-6) * gain.value()(i[2]) + bias.value()(i[2]);
  });
  CHECK(test::relative_error(y.value().data(), ref) < 1e-13);

  const auto r = test::random_like(x);
  const auto report = check_gradients(
      [&](grad::tape* t) { return test::weighted_sum(t, grad::layer_norm(t, x, gain, bias, 1e-6), r); },
      {target("x", x), target("gain", gain), target("bias", bias)});
  INFO(report.where);
  CHECK(report.worst < tolerance);
}

TEST_CASE("grad: lookup and leading_rows pass gradient checks; repeated ids add up") {
  auto table = random_parameter<shape<V, D>>(extents<shape<V, D>>(5));
  using P = dim<"positions">;
  auto positions = random_parameter<shape<P, D>>(extents<shape<P, D>>(6));
  tensor<std::int32_t, shape<B, L>> ids(2, 3);
  const std::int32_t given[] = {4, 1, 4, 0, 4, 2};  // id 4 three times
  std::copy(std::begin(given), std::end(given), ids.data());
  tensor<double, shape<B, L, D>> r(2, 3);
  test::fill_random(r);
  auto loss_of = [&](grad::tape* t) {
    auto tokens = grad::lookup(t, table, ids, 1.5);
    return test::weighted_sum(t, grad::add_broadcast<B>(t, tokens, grad::leading_rows<L>(t, positions, 3)), r);
  };
  const auto report = check_gradients(loss_of, {target("table", table), target("positions", positions)});
  INFO(report.where);
  CHECK(report.worst < tolerance);

  const auto y = grad::lookup(nullptr, table, ids, 1.5);
  CHECK(y.value()(1L, 1L, 2L) == 1.5 * table.value()(4L, 2L));
  ids(1, 2) = 5;
  CHECK_THROWS_WITH_AS(grad::lookup(nullptr, table, ids, 1.0),
                       "attn::embedding: dimension 'vocab' has extent 5, but token id 5 was given at position 5",
                       extent_error);
  CHECK_THROWS_AS(grad::leading_rows<L>(nullptr, positions, 7), extent_error);
}

TEST_CASE("grad: table_rows from an offset (incremental decoding's positions) passes gradient checks") {
  using P = dim<"positions">;
  auto positions = random_parameter<shape<P, D>>(extents<shape<P, D>>(6));
  tensor<double, shape<L, D>> r(2);
  test::fill_random(r);
  auto loss_of = [&](grad::tape* t) { return test::weighted_sum(t, grad::table_rows<L>(t, positions, 3, 2), r); };
  const auto report = check_gradients(loss_of, {target("positions", positions)});
  INFO(report.where);
  CHECK(report.worst < tolerance);
  const auto y = grad::table_rows<L>(nullptr, positions, 4, 2);
  CHECK(y.value()(1L, 0L) == positions.value()(5L, 0L));
  CHECK_THROWS_WITH_AS(grad::table_rows<L>(nullptr, positions, 5, 2),
                       "attn::grad::table_rows: dimension 'positions' has extent 6, too small for positions [5, 7)",
                       extent_error);
}

TEST_CASE("grad: dropout is reproducible from its seed, keeps about 1 − p, and passes gradient checks") {
  auto x = random_input<shape<B, L, D>>(40, 50);
  random_stream first(42), second(42), other(43);
  const auto a = grad::dropout(nullptr, x, 0.25, first);
  const auto b = grad::dropout(nullptr, x, 0.25, second);
  const auto c = grad::dropout(nullptr, x, 0.25, other);
  index_t kept = 0, same = 0, differs = 0;
  for (index_t i = 0; i < x.value().size(); ++i) {
    kept += a.value().data()[i] != 0;
    same += a.value().data()[i] == b.value().data()[i];
    differs += a.value().data()[i] != c.value().data()[i];
    if (a.value().data()[i] != 0) CHECK(a.value().data()[i] == doctest::Approx(x.value().data()[i] / 0.75));
  }
  CHECK(same == x.value().size());
  CHECK(differs > 0);
  CHECK(first.position() == std::uint64_t(x.value().size()));
  // Element i is kept by the stream's number at its position before the call, plus i.
  random_stream further(42, 1000);
  const auto d = grad::dropout(nullptr, x, 0.25, further);
  for (index_t i = 0; i < x.value().size(); ++i) {
    const bool keep = random_stream(42).uniform(1000 + std::uint64_t(i)) >= 0.25;
    CHECK(d.value().data()[i] == (keep ? x.value().data()[i] * (1.0 / 0.75) : 0.0));
  }
  const double fraction = double(kept) / double(x.value().size());
  CHECK(fraction == doctest::Approx(0.75).epsilon(0.03));  // 12 000 draws: σ ≈ 0.004

  auto small = random_input<shape<B, L, D>>(2, 3);
  const auto r = test::random_like(small);
  const auto report = check_gradients(
      [&](grad::tape* t) {
        random_stream s(7);  // the same mask at every evaluation
        return test::weighted_sum(t, grad::dropout(t, small, 0.5, s), r);
      },
      {target("x", small)});
  CHECK(report.worst < tolerance);
}

namespace {

/// add_dropout against add(x, dropout(y)) in T, forward and backward, bit for bit: with x and y
/// apart, with x wanting no gradient, and with x and y one variable (as nn::residual never
/// has, but a user may).
template <class T>
void add_dropout_as_two_steps() {
  using S = shape<B, L, D>;
  const extents<S> sizes(20, 30);
  tensor<T, S> x_values(sizes), y_values(sizes), r(sizes);
  test::fill_random(x_values);
  test::fill_random(y_values);
  test::fill_random(r);
  enum class inputs { apart, x_constant, same };
  for (const inputs kind : {inputs::apart, inputs::x_constant, inputs::same}) {
    CAPTURE(int(kind));
    const auto run = [&](bool fused) {
      grad::variable<T, S> x(tensor<T, S>(x_values), kind != inputs::x_constant);
      grad::variable<T, S> y = kind == inputs::same ? x : grad::variable<T, S>(tensor<T, S>(y_values), true);
      grad::tape tape;
      random_stream stream(42, 77);
      const auto sum = fused ? grad::add_dropout(&tape, x, y, 0.3, stream)
                             : grad::add(&tape, x, grad::dropout(&tape, y, 0.3, stream));
      CHECK(stream.position() == 77 + std::uint64_t(sizes.size()));
      grad::backward(tape, test::weighted_sum(&tape, sum, r));
      return std::tuple{tensor<T, S>(sum.value()), x.has_grad() ? tensor<T, S>(x.grad()) : tensor<T, S>(sizes),
                        tensor<T, S>(y.grad())};
    };
    const auto [fused_sum, fused_dx, fused_dy] = run(true);
    const auto [sum, dx, dy] = run(false);
    index_t equal = 0;
    for (index_t i = 0; i < sizes.size(); ++i)
      equal += fused_sum.data()[i] == sum.data()[i] && fused_dx.data()[i] == dx.data()[i] &&
               fused_dy.data()[i] == dy.data()[i];
    CHECK(equal == sizes.size());
  }
}

}  // namespace

TEST_CASE("grad: add_dropout is add(x, dropout(y)) in one pass each way, and passes gradient checks") {
  add_dropout_as_two_steps<double>();
  add_dropout_as_two_steps<float>();
  add_dropout_as_two_steps<bfloat16>();

  auto x = random_input<shape<B, L, D>>(20, 30);
  auto y = random_input<shape<B, L, D>>(20, 30);
  random_stream one(42);
  index_t dropped = 0;
  const auto fused = grad::add_dropout(nullptr, x, y, 0.3, one);
  for (index_t i = 0; i < x.value().size(); ++i) dropped += fused.value().data()[i] == x.value().data()[i];
  CHECK(dropped > 0);
  CHECK(grad::add_dropout(nullptr, x, y, 0.0, one).value().data()[7] == x.value().data()[7] + y.value().data()[7]);
  CHECK_THROWS_AS(grad::add_dropout(nullptr, x, y, 1.0, one), std::invalid_argument);

  auto small_x = random_input<shape<B, L, D>>(2, 3);
  auto small_y = random_input<shape<B, L, D>>(2, 3);
  const auto r = test::random_like(small_x);
  const auto report = check_gradients(
      [&](grad::tape* t) {
        random_stream s(7);  // the same mask at every evaluation
        return test::weighted_sum(t, grad::add_dropout(t, small_x, small_y, 0.5, s), r);
      },
      {target("x", small_x), target("y", small_y)});
  CHECK(report.worst < tolerance);
}

TEST_CASE("train: label-smoothed cross-entropy matches the formula, skips padding, passes gradient checks") {
  auto logits = random_input<shape<B, L, V>>(2, 3, 4);
  tensor<std::int32_t, shape<B, L>> targets(2, 3);
  const std::int32_t given[] = {1, 3, 0, 2, 0, 0};  // 0 is padding
  std::copy(std::begin(given), std::end(given), targets.data());
  const double eps = 0.1;
  const auto result = train::cross_entropy(nullptr, logits, targets, eps, std::int32_t{0});
  double expected = 0, nll = 0;
  for (index_t b = 0; b < 2; ++b)
    for (index_t i = 0; i < 3; ++i) {
      const int y = targets(b, i);
      if (y == 0) continue;
      double norm = 0;
      for (index_t v = 0; v < 4; ++v) norm += std::exp(logits.value()(b, i, v));
      for (index_t v = 0; v < 4; ++v) {
        const double q = (v == y ? 1 - eps : 0) + eps / 4;
        expected -= q * std::log(std::exp(logits.value()(b, i, v)) / norm);
      }
      nll -= std::log(std::exp(logits.value()(b, i, y)) / norm);
    }
  CHECK(result.tokens == 3);
  CHECK(result.loss.value().data()[0] == doctest::Approx(expected / 3).epsilon(1e-13));
  CHECK(result.nll == doctest::Approx(nll).epsilon(1e-13));

  const auto report = check_gradients(
      [&](grad::tape* t) { return train::cross_entropy(t, logits, targets, eps, std::int32_t{0}).loss; },
      {target("logits", logits)});
  INFO(report.where);
  CHECK(report.worst < tolerance);

  targets(0, 0) = 4;
  CHECK_THROWS_AS(train::cross_entropy(nullptr, logits, targets, eps, std::int32_t{0}), extent_error);
}

TEST_CASE("grad: without a tape nothing is recorded; gradients accumulate over backward passes") {
  auto x = random_input<shape<B, L, D>>(2, 3);
  auto w = random_parameter<shape<D, F>>();
  auto bias = random_parameter<shape<F>>();
  grad::tape tape;
  const auto y = grad::linear(nullptr, x, w, bias);
  CHECK(!y.requires_grad());
  CHECK(tape.size() == 0);

  tensor<double, shape<B, L, F>> r(2, 3);
  test::fill_random(r);
  grad::backward(tape, test::weighted_sum(&tape, grad::linear(&tape, x, w, bias), r));
  const std::vector<double> once(w.grad().data(), w.grad().data() + w.grad().size());
  grad::backward(tape, test::weighted_sum(&tape, grad::linear(&tape, x, w, bias), r));
  CHECK(tape.size() == 0);
  for (std::size_t i = 0; i < once.size(); ++i) CHECK(w.grad().data()[i] == doctest::Approx(2 * once[i]));
}

TEST_CASE("grad: parameter_list::zero_grad zeroes every element of every gradient; fill over arrays stays in them") {
  grad::parameter<double, shape<D, F>> w;
  grad::parameter<double, shape<F>> bias;
  grad::parameter<double, shape<V, D>> table(extents<shape<V, D>>(7));
  grad::parameter_list<double> list;
  list.add("w", w);
  list.add("bias", bias);
  list.add("table", table);
  for (auto& r : list) std::fill(r.grad, r.grad + r.size, 1.5);
  list.zero_grad();
  for (const auto& r : list) {
    INFO(r.name);
    CHECK(std::count(r.grad, r.grad + r.size, 0.0) == r.size);
  }

  std::vector<double> plain(9, -7.0);  // two arrays inside it, and what lies around them untouched
  const std::vector<flat_array<double>> arrays{{plain.data() + 1, 3}, {plain.data() + 5, 2}};
  primitives<cpu>::fill(std::span<const flat_array<double>>(arrays), 2.0);
  CHECK(plain == std::vector<double>{-7, 2, 2, 2, -7, 2, 2, -7, -7});
}

TEST_CASE("grad: operations working under names of their own give the same bits under any naming, "
          "and name the caller's dimensions in their errors") {
  // Two namings of the same extents, as an encoder's and a decoder's lengths are.
  using L2 = dim<"len2">;
  using K2 = dim<"keys2">;
  using W = dim<"width", 6>;
  auto x = random_input<shape<B, L, D>>(2, 3);
  auto m = random_input<shape<B, K, D>>(2, 4);
  const auto renamed = []<class S>(const auto& v, S) {
    return grad::variable<double, S>(tensor<double, S>(view_as<S>(v.value().view())), true);
  };
  auto x2 = renamed(x, shape<B, L2, D>{});
  auto m2 = renamed(m, shape<B, K2, D>{});
  auto w = random_parameter<shape<D, W>>();
  auto bias = random_parameter<shape<W>>();
  random_stream noise(7);
  const auto run = [&](const auto& xs, const auto& ms, auto length, auto keys) {
    using Q = decltype(length);
    using KK = decltype(keys);
    grad::tape t;
    random_stream drops = noise;
    auto q = grad::split_heads<H, DH, Q>(&t, grad::linear_relu(&t, xs, w, bias));
    auto k = grad::split_heads<H, DH, KK>(&t, grad::linear(&t, ms, w, bias));
    auto scores = grad::product<DH>(&t, q, k);
    auto out = grad::merge_heads<W>(&t, grad::product<KK>(&t, scores, k));
    auto y = grad::add_dropout(&t, out, grad::dropout(&t, out, 0.25, drops), 0.5, drops);
    auto loss = grad::sum<B>(&t, grad::sum<Q>(&t, grad::sum<W>(&t, grad::add(&t, y, y))));
    xs.clear_grad();
    ms.clear_grad();
    w.clear_grad();
    bias.clear_grad();
    grad::backward(t, loss);
    // Everything under the first naming's names, to compare.
    return std::tuple{tensor<double, shape<B, L, W>>(view_as<shape<B, L, W>>(y.value().view())),
                      tensor<double, shape<B, L, D>>(view_as<shape<B, L, D>>(xs.grad().view())),
                      tensor<double, shape<B, K, D>>(view_as<shape<B, K, D>>(ms.grad().view())),
                      tensor<double, shape<D, W>>(w.grad()), tensor<double, shape<W>>(bias.grad())};
  };
  const auto [y1, dx1, dm1, dw1, db1] = run(x, m, L{}, K{});
  const auto [y2, dx2, dm2, dw2, db2] = run(x2, m2, L2{}, K2{});
  const auto same = [](const auto& a, const auto& b) {
    for (index_t i = 0; i < a.size(); ++i)
      if (a.data()[i] != b.data()[i]) return false;
    return a.size() == b.size();
  };
  CHECK(same(y1, y2));
  CHECK(same(dx1, dx2));
  CHECK(same(dm1, dm2));
  CHECK(same(dw1, dw2));
  CHECK(same(db1, db2));

  // Errors name the caller's dimensions, not the operation's own.
  auto short_x = random_input<shape<B, L, D>>(2, 2);
  CHECK_THROWS_WITH_AS(grad::add(nullptr, x, short_x),
                       "attn::grad::add: dimension 'len' has extent 3 in one operand and 2 in the other",
                       extent_error);
  CHECK_THROWS_WITH_AS(grad::add_dropout(nullptr, x, short_x, 0.5, noise),
                       "attn::grad::add_dropout: dimension 'len' has extent 3 in one operand and 2 in the other",
                       extent_error);
  auto q = grad::split_heads<H, DH, L>(nullptr, grad::linear(nullptr, x, w, bias));
  auto other_batch = random_input<shape<B, K, D>>(3, 4);
  auto k3 = grad::split_heads<H, DH, K>(nullptr, grad::linear(nullptr, other_batch, w, bias));
  using wide = dim<"wide">;
  auto unsplittable = random_input<shape<B, L, wide>>(2, 3, 6);
  CHECK_THROWS_WITH_AS((grad::split_heads<dim<"h">, dim<"dh", 4>, L>(nullptr, unsplittable)),
                       "attn::split: dimension 'wide' has extent 6 in one operand and 4 in the other",
                       extent_error);
  CHECK_THROWS_WITH_AS(grad::product<DH>(nullptr, q, k3),
                       "attn::grad::product: dimension 'batch' has extent 2 in one operand and 3 in the other",
                       extent_error);
}
