// Tests of include/attn/expr/iota.hpp (lowered by include/attn/cpu): coordinates as values,
// alone and inside the expressions of attention variants, against plain loops.
#include <doctest/doctest.h>

#include <cmath>

#include "../reference.hpp"

namespace {
using namespace attn;
using batch = dim<"batch">;
using heads = dim<"heads">;
using queries = dim<"queries">;
using keys = dim<"keys">;
using four = dim<"four", 4>;
}  // namespace

TEST_CASE("expr: iota counts along its dimension from its start") {
  const tensor<int, shape<keys>> from_zero(iota<int, keys>(7));
  const tensor<double, shape<keys>> from_five(iota<double, keys>(3, 5.0));
  const tensor<float, shape<four>> fixed(iota<float, four>(4, -1.5f));
  for (index_t i = 0; i < 7; ++i) CHECK(from_zero(i) == i);
  for (index_t i = 0; i < 3; ++i) CHECK(from_five(i) == 5.0 + double(i));
  for (index_t i = 0; i < 4; ++i) CHECK(fixed(i) == -1.5f + float(i));
  const tensor<int, shape<keys>> empty(iota<int, keys>(0));
  CHECK(empty.size() == 0);
}

TEST_CASE("expr: index_along gives every element its coordinate, and ALiBi's bias is one expression") {
  tensor<double, shape<batch, heads, queries, keys>> scores(2, 3, 5, 7);
  test::fill_random(scores);
  tensor<double, shape<heads>> slopes(3);
  test::fill_random(slopes, 0.1, 1.0);
  const index_t first = 4;  // the queries are positions 4 … 8, as in a step of incremental decoding
  const tensor<double, shape<batch, heads, queries, keys>> biased(
      scores - broadcast_like(slopes, scores) *
                   abs(index_along<queries>(scores, double(first)) - index_along<keys>(scores)));
  const tensor<bool, shape<batch, heads, queries, keys>> window(
      abs(index_along<queries>(scores) - index_along<keys>(scores)) <= 1.0);
  for (index_t b = 0; b < 2; ++b)
    for (index_t h = 0; h < 3; ++h)
      for (index_t q = 0; q < 5; ++q)
        for (index_t k = 0; k < 7; ++k) {
          const double distance = std::fabs(double(q + first - k));
          CHECK(biased(b, h, q, k) == doctest::Approx(scores(b, h, q, k) - slopes(h) * distance).epsilon(1e-15));
          CHECK(window(b, h, q, k) == (std::abs(q - k) <= 1));
        }
}

TEST_CASE("expr: iota under a permute and a slice") {
  using S = shape<queries, keys>;
  const extents<S> sizes(4, 6);
  tensor<int, S> x(sizes);
  const tensor<int, shape<keys, queries>> swapped(permute<keys, queries>(index_along<keys>(x)));
  const tensor<int, S> middle(slice<keys>(index_along<keys>(x) * 10, 2, 3));
  for (index_t k = 0; k < 6; ++k)
    for (index_t q = 0; q < 4; ++q) CHECK(swapped(k, q) == k);
  for (index_t q = 0; q < 4; ++q)
    for (index_t k = 0; k < 3; ++k) CHECK(middle(q, k) == 10 * (k + 2));
}
