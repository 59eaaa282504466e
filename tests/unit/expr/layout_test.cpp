// Tests of include/attn/expr/layout.hpp: permute, split (d_model -> heads x d_k), merge, rename.
#include <doctest/doctest.h>

#include <string>
#include <type_traits>

#include "../reference.hpp"

namespace {
using namespace attn::test;
using batch = attn::dim<"batch">;
using len = attn::dim<"len">;
using d_model = attn::dim<"d_model", 12>;
using heads = attn::dim<"heads", 3>;
using d_k = attn::dim<"d_k", 4>;
using s3 = attn::shape<batch, len, d_model>;
}  // namespace

TEST_CASE("permute reorders dimensions; every order of a rank-3 tensor") {
  for (int draw = 0; draw < 3; ++draw) {
    attn::tensor<float, s3> x(random_extent(), random_extent());
    fill_random(x);
    auto p1 = attn::eval(attn::permute<d_model, batch, len>(x));
    static_assert(std::is_same_v<decltype(p1)::shape_type, attn::shape<d_model, batch, len>>);
    auto p2 = attn::eval(attn::permute<len, d_model, batch>(x));
    auto p3 = attn::eval(attn::permute<batch, d_model, len>(x));
    auto p4 = attn::eval(attn::permute<len, batch, d_model>(x));
    auto p5 = attn::eval(attn::permute<d_model, len, batch>(x));
    auto p6 = attn::eval(attn::permute<batch, len, d_model>(x));
    for_each_index(x.extents(), [&](const auto& i) {
      const float v = at(x, i);
      CHECK(p1(i[2], i[0], i[1]) == v);
      CHECK(p2(i[1], i[2], i[0]) == v);
      CHECK(p3(i[0], i[2], i[1]) == v);
      CHECK(p4(i[1], i[0], i[2]) == v);
      CHECK(p5(i[2], i[1], i[0]) == v);
      CHECK(p6(i[0], i[1], i[2]) == v);
    });
  }
}

TEST_CASE("split then permute gives the per-head layout; merge undoes it") {
  attn::tensor<float, s3> x(2, 5);
  fill_random(x);
  auto split = attn::split<d_model, heads, d_k>(x);
  static_assert(std::is_same_v<decltype(split)::shape_type, attn::shape<batch, len, heads, d_k>>);
  auto per_head = attn::eval(attn::permute<batch, heads, len, d_k>(split));
  for_each_index(per_head.extents(), [&](const auto& i) {
    CHECK(at(per_head, i) == x(i[0], i[2], i[1] * 4 + i[3]));
  });
  auto merged = attn::eval(attn::merge<heads, d_k, d_model>(attn::permute<batch, len, heads, d_k>(per_head)));
  static_assert(std::is_same_v<decltype(merged)::shape_type, s3>);
  for (attn::index_t i = 0; i < x.size(); ++i) CHECK(merged.data()[i] == x.data()[i]);
}

TEST_CASE("split of a dynamic dimension derives or takes the parts' sizes") {
  using flat = attn::dim<"flat">;
  using outer = attn::dim<"outer">;
  using inner = attn::dim<"inner">;
  using four = attn::dim<"four", 4>;
  attn::tensor<float, attn::shape<flat>> x(12);
  for (attn::index_t i = 0; i < 12; ++i) x(i) = static_cast<float>(i);
  auto a = attn::eval(attn::split<flat, outer, four>(x));
  CHECK(a.extent<outer>() == 3);
  CHECK(a(2, 1) == 9.0f);
  auto b = attn::eval(attn::split<flat, outer, inner>(x, 6));
  CHECK(b.extent<inner>() == 2);
  CHECK(b(5, 1) == 11.0f);
  CHECK_THROWS_AS((void)(attn::split<flat, outer, inner>(x)), attn::extent_error);
  CHECK_THROWS_AS((void)(attn::split<flat, outer, inner>(x, 5)), attn::extent_error);
  attn::tensor<float, attn::shape<flat>> odd(10);
  CHECK_THROWS_AS((void)(attn::split<flat, outer, four>(odd)), attn::extent_error);
}

TEST_CASE("rename gives a dimension a second name and keeps its size and data") {
  using len_k = attn::dim<"len_k">;
  attn::tensor<float, s3> x(2, 3);
  fill_random(x);
  auto r = attn::eval(attn::rename<len, len_k>(x));
  static_assert(std::is_same_v<decltype(r)::shape_type, attn::shape<batch, len_k, d_model>>);
  CHECK(r.extent<len_k>() == 3);
  for (attn::index_t i = 0; i < x.size(); ++i) CHECK(r.data()[i] == x.data()[i]);
}

TEST_CASE("self-attention scores: queries and keys of one length under two names") {
  using len_k = attn::dim<"len_k">;
  attn::tensor<float, s3> x(2, 3);
  fill_random(x);
  auto q = attn::permute<batch, heads, len, d_k>(attn::split<d_model, heads, d_k>(x));
  auto scores = attn::eval(attn::contract<d_k>(q, attn::rename<len, len_k>(q)));
  static_assert(std::is_same_v<decltype(scores)::shape_type, attn::shape<batch, heads, len, len_k>>);
  for_each_index(scores.extents(), [&](const auto& i) {
    double s = 0;
    for (attn::index_t c = 0; c < 4; ++c) s += (double)x(i[0], i[2], i[1] * 4 + c) * x(i[0], i[3], i[1] * 4 + c);
    CHECK(at(scores, i) == doctest::Approx(s).epsilon(1e-5));
  });
}

TEST_CASE("permuting into the operand itself goes through a temporary") {
  using n = attn::dim<"n">;
  using m = attn::dim<"m">;
  attn::tensor<float, attn::shape<n, m>> square(4, 4);
  fill_random(square);
  const auto before = square;
  using t = attn::dim<"t">;
  auto renamed = attn::rename<m, n>(attn::rename<n, t>(square));  // [t, n]
  square = attn::rename<t, m>(attn::permute<n, t>(renamed));      // [n, m], transposed
  for (attn::index_t i = 0; i < 4; ++i)
    for (attn::index_t j = 0; j < 4; ++j) CHECK(square(i, j) == before(j, i));
}
