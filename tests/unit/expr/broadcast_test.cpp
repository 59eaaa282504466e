// Tests of include/attn/expr/broadcast.hpp: masks over heads and queries, biases over rows.
#include <doctest/doctest.h>

#include <type_traits>

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
