// Tests of include/attn/expr/broadcast.hpp: masks over heads and queries, biases over rows.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../reference.hpp"

namespace {
using namespace attn::test;
using batch = attn::dim<"batch">;
using heads = attn::dim<"heads", 2>;
using tgt = attn::dim<"tgt">;
using src = attn::dim<"src">;
using d_ff = attn::dim<"d_ff", 7>;
}  // namespace

TEST_CASE("a padding mask [batch, src] broadcast over heads and queries") {
  for (int draw = 0; draw < 3; ++draw) {
    const auto b = random_extent(), t = random_extent(), s = random_extent();
    attn::tensor<float, attn::shape<batch, heads, tgt, src>> scores(b, t, s);
    attn::tensor<float, attn::shape<batch, src>> mask(b, s);
    fill_random(scores);
    fill_random(mask);
    auto masked = attn::eval(scores + attn::broadcast_like(mask, scores));
    for_each_index(masked.extents(), [&](const auto& i) {
      CHECK(at(masked, i) == at(scores, i) + mask(i[0], i[3]));
    });
  }
}

TEST_CASE("a bias over rows; a scalar-shaped tensor over everything; a causal mask over batch") {
  using row = attn::dim<"row">;
  attn::tensor<double, attn::shape<row, d_ff>> x(5);
  attn::tensor<double, attn::shape<d_ff>> bias;
  fill_random(x);
  fill_random(bias);
  auto y = attn::eval(x + attn::broadcast<attn::shape<row, d_ff>>(bias, x.extents()));
  for_each_index(y.extents(), [&](const auto& i) { CHECK(at(y, i) == x(i[0], i[1]) + bias(i[1])); });

  attn::tensor<double, attn::shape<>> scale;
  scale.data()[0] = 3.0;
  auto z = attn::eval(x * attn::broadcast_like(scale, x));
  for (attn::index_t i = 0; i < x.size(); ++i) CHECK(z.data()[i] == 3.0 * x.data()[i]);

  attn::tensor<float, attn::shape<tgt, src>> causal(4, 4);
  for (attn::index_t i = 0; i < 4; ++i)
    for (attn::index_t j = 0; j < 4; ++j) causal(i, j) = j > i ? -1e9f : 0.0f;
  attn::tensor<float, attn::shape<batch, tgt, src>> logits(3, 4, 4);
  auto with_mask = attn::eval(logits + attn::broadcast_like(causal, logits));
  CHECK(with_mask(2, 1, 3) == -1e9f);
  CHECK(with_mask(2, 3, 1) == 0.0f);
}

TEST_CASE("broadcast checks the sizes it shares with the target") {
  attn::tensor<float, attn::shape<batch, src>> mask(2, 5);
  attn::tensor<float, attn::shape<batch, heads, tgt, src>> scores(2, 3, 6);
  CHECK_THROWS_AS((void)attn::broadcast_like(mask, scores), attn::extent_error);
}

TEST_CASE_TEMPLATE("a tensor over the leading dimensions, as positional encodings over the batch: each sum rounded once",
                   T, float, attn::bfloat16, attn::float16) {
  // x [batch, tgt, d_ff] + p [tgt, d_ff] takes the CPU's pass over rows (cpu/contract.hpp); the
  // sums are those of the general road, float(x) + float(p) rounded once to T, in place too.
  using S = attn::shape<batch, tgt, d_ff>;
  using P = attn::shape<tgt, d_ff>;
  using Q = attn::shape<batch, d_ff>;  // repeated along a middle dimension: Eigen's road
  using X = attn::tensor_view<T, S, attn::cpu>;
  using attn::cpu_backend::detail::repeated_rows_addition;
  using over_rows = decltype(std::declval<X>() + attn::broadcast<S>(std::declval<attn::tensor_view<T, P, attn::cpu>>(),
                                                                    std::declval<attn::extents<S>>()));
  using over_middle = decltype(std::declval<X>() + attn::broadcast<S>(std::declval<attn::tensor_view<T, Q, attn::cpu>>(),
                                                                      std::declval<attn::extents<S>>()));
  static_assert(repeated_rows_addition<T, S, over_rows>::matches);
  static_assert(!repeated_rows_addition<T, S, over_middle>::matches);
  const auto bits = [](T v) {
    if constexpr (std::is_same_v<T, float>) return std::bit_cast<std::uint32_t>(v);
    else return std::uint32_t(v.bits);
  };
  for (const auto& [b, t] : {std::pair<attn::index_t, attn::index_t>{3, 5}, {1, 1}, {0, 4}, {40, 97}}) {
    CAPTURE(b);
    CAPTURE(t);
    attn::tensor<float, S> x_wide(b, t);
    attn::tensor<float, P> p_wide(t);
    attn::tensor<float, Q> q_wide(b);
    fill_random(x_wide, -300.0, 300.0);
    fill_random(p_wide, -300.0, 300.0);
    fill_random(q_wide, -300.0, 300.0);
    attn::tensor<T, S> x(b, t);
    attn::tensor<T, P> p(t);
    attn::tensor<T, Q> q(b);
    x = attn::cast<T>(x_wide.view());
    p = attn::cast<T>(p_wide.view());
    q = attn::cast<T>(q_wide.view());
    const auto y = attn::eval(x + attn::broadcast<S>(p, x.extents()));
    attn::index_t wrong = 0;
    for_each_index(y.extents(), [&](const auto& i) {
      wrong += bits(y(i[0], i[1], i[2])) != bits(T(float(x(i[0], i[1], i[2])) + float(p(i[1], i[2]))));
    });
    const auto z = attn::eval(x + attn::broadcast<S>(q, x.extents()));  // b = 0: q has no elements
    for_each_index(z.extents(), [&](const auto& i) {
      wrong += bits(z(i[0], i[1], i[2])) != bits(T(float(x(i[0], i[1], i[2])) + float(q(i[0], i[2]))));
    });
    CHECK(wrong == 0);
    x = x + attn::broadcast<S>(p, x.extents());
    attn::index_t wrong_in_place = 0;
    for (attn::index_t i = 0; i < y.size(); ++i) wrong_in_place += bits(x.data()[i]) != bits(y.data()[i]);
    CHECK(wrong_in_place == 0);
  }
}
