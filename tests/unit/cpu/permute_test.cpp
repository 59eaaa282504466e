// Tests of include/attn/cpu/permute.hpp: permutations that keep the innermost dimension, copied
// a row at a time, against plain loops; with reshapes around them (the heads' split and merge),
// 16-bit elements, enough rows for several threads, and the orders that leave the row copy to
// Eigen's shuffle.
#include <doctest/doctest.h>

#include <type_traits>

#include <attn/core/float16.hpp>

#include "../reference.hpp"

namespace {
using namespace attn::test;
using batch = attn::dim<"batch">;
using len = attn::dim<"len">;
using heads = attn::dim<"heads">;
using d_k = attn::dim<"d_k">;
using d_model = attn::dim<"d_model">;
using s4 = attn::shape<batch, heads, len, d_k>;

/// Every order of [batch, heads, len] before d_k, and two that move d_k, against loops.
template <class T>
void check_orders(attn::index_t b, attn::index_t h, attn::index_t l, attn::index_t d) {
  attn::tensor<T, s4> x(b, h, l, d);
  fill_random(x);
  using attn::cpu_backend::detail::row_permutation;
  static_assert(row_permutation<T, decltype(attn::permute<len, batch, heads, d_k>(x))>::matches);
  static_assert(!row_permutation<T, decltype(attn::permute<d_k, batch, heads, len>(x))>::matches);
  const auto p1 = attn::eval(attn::permute<batch, len, heads, d_k>(x));  // the heads' merge
  const auto p2 = attn::eval(attn::permute<len, batch, heads, d_k>(x));
  const auto p3 = attn::eval(attn::permute<heads, len, batch, d_k>(x));
  const auto p4 = attn::eval(attn::permute<len, heads, batch, d_k>(x));
  const auto p5 = attn::eval(attn::permute<heads, batch, len, d_k>(x));
  const auto p6 = attn::eval(attn::permute<batch, heads, len, d_k>(x));  // the identity
  const auto q1 = attn::eval(attn::permute<d_k, batch, heads, len>(x));  // Eigen's shuffle
  const auto q2 = attn::eval(attn::permute<batch, heads, d_k, len>(x));
  for_each_index(x.extents(), [&](const auto& i) {
    const T v = at(x, i);
    const auto [ib, ih, il, id] = i;
    CHECK(p1(ib, il, ih, id) == v);
    CHECK(p2(il, ib, ih, id) == v);
    CHECK(p3(ih, il, ib, id) == v);
    CHECK(p4(il, ih, ib, id) == v);
    CHECK(p5(ih, ib, il, id) == v);
    CHECK(p6(ib, ih, il, id) == v);
    CHECK(q1(id, ib, ih, il) == v);
    CHECK(q2(ib, ih, id, il) == v);
  });
}
}  // namespace

TEST_CASE("permutations that keep the innermost dimension: every order, against loops") {
  for (int draw = 0; draw < 4; ++draw)
    check_orders<float>(random_extent(), random_extent(), random_extent(), random_extent());
  check_orders<double>(2, 3, 5, 7);
  check_orders<attn::bfloat16>(3, 2, 7, 5);
  check_orders<attn::float16>(2, 5, 3, 8);
  check_orders<float>(3, 8, 300, 16);  // 7200 rows of 16: split across threads
  check_orders<float>(2, 3, 0, 4);     // no rows
}

TEST_CASE("the heads' split and merge through reshapes copy rows, and undo each other") {
  attn::tensor<float, attn::shape<batch, len, d_model>> x(3, 50, 24);
  fill_random(x);
  const auto split = attn::permute<batch, heads, len, d_k>(attn::split<d_model, heads, d_k>(x, 4));
  static_assert(attn::cpu_backend::detail::row_permutation<float, std::remove_cvref_t<decltype(split)>>::matches);
  const auto per_head = attn::eval(split);
  for (attn::index_t b = 0; b < 3; ++b)
    for (attn::index_t h = 0; h < 4; ++h)
      for (attn::index_t l = 0; l < 50; ++l)
        for (attn::index_t c = 0; c < 6; ++c) CHECK(per_head(b, h, l, c) == x(b, l, h * 6 + c));
  const auto merge = attn::merge<heads, d_k, d_model>(attn::permute<batch, len, heads, d_k>(per_head));
  static_assert(attn::cpu_backend::detail::row_permutation<float, std::remove_cvref_t<decltype(merge)>>::matches);
  const auto merged = attn::eval(merge);
  for (attn::index_t i = 0; i < x.size(); ++i) CHECK(merged.data()[i] == x.data()[i]);
}
