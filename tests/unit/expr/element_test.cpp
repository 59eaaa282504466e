// Tests of include/attn/expr/element.hpp: one element of an expression computed alone equals
// that element of the whole expression evaluated by the CPU backend, through every node kind;
// a placeholder reads the given value; input_offset names the element of an input read.
#include <doctest/doctest.h>

#include <cmath>

#include "../reference.hpp"

namespace {
using namespace attn;
using batch = dim<"batch">;
using heads = dim<"heads">;
using queries = dim<"queries">;
using keys = dim<"keys">;
using d_model = dim<"d_model">;
using d_k = dim<"d_k", 3>;
using S = shape<batch, heads, queries, keys>;

/// Every element of e computed alone equals the same element of e evaluated whole.
template <class E>
void check_every_element(const E& e) {
  const tensor<value_t<E>, shape_t<E>> whole(e);
  test::for_each_index(e.extents(), [&](const auto& c) {
    CAPTURE(test::offset_of(e.extents(), c));
    CHECK(element_at(e, c) == test::at(whole, c));
  });
}
}  // namespace

TEST_CASE("expr: element_at computes one element of views, constants, iotas and arithmetic") {
  tensor<double, S> scores(2, 3, 5, 7);
  test::fill_random(scores);
  tensor<double, shape<heads>> slopes(3);
  test::fill_random(slopes, 0.1, 1.0);
  check_every_element(scores.view());
  check_every_element(scores * 2.0 + 1.0);
  // ALiBi's modification, as the variant writes it: broadcast, two coordinates, abs.
  check_every_element(scores - broadcast_like(slopes, scores) *
                                   abs(index_along<queries>(scores, 4.0) - index_along<keys>(scores)));
  // Select, comparisons, tanh and exp, max.
  check_every_element(where(abs(index_along<queries>(scores) - index_along<keys>(scores)) <= 1.0, tanh(scores),
                            exp(-scores)));
  check_every_element(max(scores, 0.25) / (1.0 + abs(scores)));
  check_every_element(cast<float>(scores > 0.0));
}

TEST_CASE("expr: element_at reads through permutes, slices and reshapes") {
  tensor<double, shape<batch, queries, d_model>> x(2, 4, 6);
  test::fill_random(x);
  check_every_element(permute<d_model, batch, queries>(x));
  check_every_element(slice<queries>(x, 1, 2) * 3.0);
  check_every_element(split<d_model, heads, d_k>(x));
  check_every_element(merge<queries, d_model, keys>(x) + 1.0);
  check_every_element(permute<heads, batch, d_k, queries>(split<d_model, heads, d_k>(x)));
  check_every_element(rename<queries, keys>(x));
  tensor<double, shape<queries>> row(4);
  test::fill_random(row);
  check_every_element(broadcast_like(row, x) + permute<batch, queries, d_model>(permute<d_model, batch, queries>(x)));
}

TEST_CASE("expr: a placeholder reads the value given; the derivative and the input read are found") {
  const extents<S> sizes(2, 3, 5, 7);
  tensor<double, shape<heads>> slopes(3);
  test::fill_random(slopes, 0.1, 1.0);
  const auto modify = [](const auto& s, const auto& m) {
    return s * 0.5 - broadcast_like(m, s) * abs(index_along<queries>(s, 2.0) - index_along<keys>(s));
  };
  const auto e = modify(input<0>(placeholder<double>(sizes)), input<1>(slopes));
  const auto d_score = derivative<0>(e);
  const auto d_slope = derivative<1>(e);
  test::for_each_index(sizes, [&](const auto& c) {
    const auto [b, h, i, j] = c;
    const double given = 0.1 * double(b + h) - 0.3 * double(i * j);
    const double distance = std::fabs(double(i + 2 - j));
    CHECK(element_at(e, c, given) == doctest::Approx(0.5 * given - slopes(h) * distance).epsilon(1e-15));
    CHECK(element_at(d_score, c, given) == 0.5);
    CHECK(element_at(d_slope, c, given) == -distance);
    CHECK(input_offset<1>(e, c) == h);
    CHECK(input_offset<0>(e, c) == test::offset_of(sizes, c));
  });
  CHECK(input_offset<2>(e, {0, 0, 0, 0}) == -1);
}
