// Tests of include/attn/expr/dropout_mask.hpp (lowered by include/attn/cpu): dropout's mask as
// a leaf of an expression, against the stream's numbers at each element's row-major index.
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>

#include "../reference.hpp"

namespace {
using namespace attn;
using batch = dim<"batch">;
using len = dim<"len">;
using feat = dim<"feat">;
using S = shape<batch, len, feat>;
}  // namespace

TEST_CASE("expr: dropout_mask keeps an element, as 1 / (1 - p), where the stream's number at its index is ≥ p") {
  const random_stream numbers(5);
  const std::uint64_t first = 1000;
  const extents<S> sizes(4, 6, 50);
  const tensor<float, S> mask(dropout_mask<float>(sizes, 0.25, numbers, first));
  index_t kept = 0;
  for (index_t b = 0; b < 4; ++b)
    for (index_t l = 0; l < 6; ++l)
      for (index_t f = 0; f < 50; ++f) {
        const auto at = std::uint64_t((b * 6 + l) * 50 + f);
        const float expected = numbers.uniform(first + at) >= 0.25 ? float(1.0 / 0.75) : 0.0f;
        CHECK(mask(b, l, f) == expected);
        kept += mask(b, l, f) != 0;
      }
  // 1 200 draws: the kept fraction's σ is about 0.0125.
  CHECK(double(kept) / 1200.0 == doctest::Approx(0.75).epsilon(0.08));

  // In a product, through a permute (read at the permute's index), and its derivative.
  tensor<double, S> x(sizes);
  test::fill_random(x);
  const auto dmask = dropout_mask<double>(sizes, 0.25, numbers, first);
  const tensor<double, S> y(x * dmask);
  const tensor<double, shape<feat, batch, len>> moved(permute<feat, batch, len>(dmask));
  const tensor<double, S> slope(derivative<0>(input<0>(x) * dmask));
  for (index_t b = 0; b < 4; ++b)
    for (index_t l = 0; l < 6; ++l)
      for (index_t f = 0; f < 50; ++f) {
        const double m = mask(b, l, f) != 0 ? 1.0 / 0.75 : 0.0;  // in double
        CHECK(y(b, l, f) == x(b, l, f) * m);
        CHECK(moved(f, b, l) == m);
        CHECK(slope(b, l, f) == m);
      }
}

TEST_CASE("expr: dropout_mask refuses p outside [0, 1)") {
  const random_stream numbers(5);
  const extents<S> sizes(1, 2, 3);
  CHECK_THROWS_WITH_AS(dropout_mask<float>(sizes, 1.0, numbers, 0),
                       "attn::dropout_mask: p must be in [0, 1), got 1.000000", std::invalid_argument);
  CHECK_THROWS_AS(dropout_mask<float>(sizes, -0.1, numbers, 0), std::invalid_argument);
  const tensor<float, S> all(dropout_mask<float>(sizes, 0.0, numbers, 0));
  for (index_t i = 0; i < all.size(); ++i) CHECK(all.data()[i] == 1.0f);
}
