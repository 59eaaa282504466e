// Tests of include/attn/cpu/assign.hpp: the destination may also be an operand, read in place,
// shifted, reordered, or inside a contraction or reduction; the result is as if evaluated
// into fresh memory.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "../reference.hpp"

namespace {
using namespace attn::test;
using n = attn::dim<"n">;
using k = attn::dim<"k">;
using m = attn::dim<"m">;
}  // namespace

TEST_CASE("a shifted overlapping window, read elementwise, is not overwritten before it is read") {
  for (attn::index_t size : {9, 100, 70000}) {
    CAPTURE(size);
    attn::tensor<float, attn::shape<n>> x(size);
    for (attn::index_t i = 0; i < size; ++i) x(i) = static_cast<float>(i);
    const attn::extents<attn::shape<n>> window(size - 1);
    attn::tensor_view<float, attn::shape<n>> tail(x.data() + 1, window);
    attn::tensor_view<const float, attn::shape<n>> head(x.data(), window);
    tail = head * 1.0f + 0.5f;  // x[i + 1] = x[i] + 0.5
    for (attn::index_t i = 1; i < size; ++i) REQUIRE(x(i) == static_cast<float>(i - 1) + 0.5f);
    attn::tensor<float, attn::shape<n>> y(size);
    for (attn::index_t i = 0; i < size; ++i) y(i) = static_cast<float>(i);
    attn::tensor_view<float, attn::shape<n>> front(y.data(), window);
    attn::tensor_view<const float, attn::shape<n>> back(y.data() + 1, window);
    front = back - 0.5f;  // y[i] = y[i + 1] - 0.5
    for (attn::index_t i = 0; i + 1 < size; ++i) REQUIRE(y(i) == static_cast<float>(i + 1) - 0.5f);
  }
}

TEST_CASE("a product written over one of its operands") {
  attn::tensor<float, attn::shape<m, k>> a(6, 6);
  attn::tensor<float, attn::shape<k, n>> b(6, 6);
  fill_random(a);
  fill_random(b);
  const auto ref = reference(attn::extents<attn::shape<m, n>>(6, 6), [&](const auto& i) {
    double s = 0;
    for (attn::index_t c = 0; c < 6; ++c) s += (double)a(i[0], c) * b(c, i[1]);
    return s;
  });
  // a's memory, seen as [m, n], receives a · b.
  attn::tensor_view<float, attn::shape<m, n>> into_a(a.data(), attn::extents<attn::shape<m, n>>(6, 6));
  into_a = attn::contract<k>(a, b);
  CHECK(relative_error(a.data(), ref) < 1e-6);
}

TEST_CASE("a reduction written over its operand's first row") {
  attn::tensor<double, attn::shape<m, n>> x(4, 5);
  fill_random(x);
  std::vector<double> ref;
  for (attn::index_t j = 0; j < 5; ++j) ref.push_back(x(0, j) + x(1, j) + x(2, j) + x(3, j));
  attn::tensor_view<double, attn::shape<n>> row0(x.data(), attn::extents<attn::shape<n>>(5));
  row0 = attn::sum<m>(x);
  CHECK(relative_error(x.data(), ref) < 1e-14);
}

namespace {
/// A linear layer's operands, random: x [rows, 7], W [7, cols] and the bias [cols].
template <class T>
struct linear_layer {
  attn::tensor<T, attn::shape<m, k>> a;
  attn::tensor<T, attn::shape<k, n>> b;
  attn::tensor<T, attn::shape<n>> bias;
  linear_layer(attn::index_t rows, attn::index_t cols) : a(rows, 7), b(7, cols), bias(cols) {
    fill_random(a);
    fill_random(b);
    fill_random(bias);
  }
  /// out = x·W + b (then the ReLU), the pattern the CPU executor takes its fast road for.
  void into(attn::tensor<T, attn::shape<m, n>>& out, bool relu) const {
    const auto biased = attn::contract<k>(a, b) + attn::broadcast(bias, out.extents());
    if (relu) out = attn::relu(biased);
    else out = biased;
  }
  /// The same written over a copy of x's memory (rows = cols): the fast road must not be taken,
  /// and Eigen's general road evaluates it.
  attn::tensor<T, attn::shape<m, k>> over_a(bool relu) const {
    auto a_copy = a;
    const attn::extents<attn::shape<m, n>> sizes(a.extents()[0], b.extents()[1]);
    attn::tensor_view<T, attn::shape<m, n>> into_a(a_copy.data(), sizes);
    const auto over = attn::contract<k>(a_copy, b) + attn::broadcast(bias, into_a.extents());
    if (relu) into_a = attn::relu(over);
    else into_a = over;
    return a_copy;
  }
};
}  // namespace

TEST_CASE("a product with a bias and a ReLU (a linear layer's epilogue), apart from and over its operands") {
  // 7 × 7 in one piece; 300 × 257 in a piece a thread (the bias rows' loop splits above 2¹⁵).
  for (const auto& [rows, cols] : {std::pair<attn::index_t, attn::index_t>{7, 7}, {300, 257}}) {
    CAPTURE(rows);
    const linear_layer<double> layer(rows, cols);
    const auto& [a, b, bias] = layer;
    for (const bool relu : {false, true}) {
      CAPTURE(relu);
      const auto ref = reference(attn::extents<attn::shape<m, n>>(rows, cols), [&](const auto& i) {
        double s = bias(i[1]);
        for (attn::index_t c = 0; c < 7; ++c) s += a(i[0], c) * b(c, i[1]);
        return relu ? std::max(s, 0.0) : s;
      });
      static_assert(attn::detail::affine_epilogue<decltype(attn::relu(
                        attn::contract<k>(a, b) + attn::broadcast(bias, attn::extents<attn::shape<m, n>>(7, 7))))>::matches);
      attn::tensor<double, attn::shape<m, n>> out(rows, cols);
      layer.into(out, relu);
      CHECK(relative_error(out.data(), ref) < 1e-12);
      if (rows != cols) continue;
      CHECK(relative_error(layer.over_a(relu).data(), ref) < 1e-12);
    }
  }
}

TEST_CASE_TEMPLATE("in 16 bits a linear layer's epilogue adds the bias to the float product and rounds once",
                   T, attn::bfloat16, attn::float16) {
  for (const auto& [rows, cols] : {std::pair<attn::index_t, attn::index_t>{7, 7}, {300, 257}}) {
    CAPTURE(rows);
    const linear_layer<T> layer(rows, cols);
    attn::tensor<float, attn::shape<m, n>> product(rows, cols);  // the same GEMM on the widened operands
    product = attn::contract<k>(attn::cast<float>(layer.a), attn::cast<float>(layer.b));
    for (const bool relu : {false, true}) {
      CAPTURE(relu);
      attn::tensor<T, attn::shape<m, n>> out(rows, cols);
      layer.into(out, relu);
      int differing = 0;
      for (attn::index_t i = 0; i < rows; ++i)
        for (attn::index_t j = 0; j < cols; ++j) {
          const float sum = product(i, j) + static_cast<float>(layer.bias(j));
          const T want = static_cast<T>(relu ? std::max(sum, 0.0f) : sum);
          differing += static_cast<float>(out(i, j)) != static_cast<float>(want);
        }
      CHECK(differing == 0);
      if (rows != cols) continue;
      // Eigen's general road: the same bits.
      const auto general = layer.over_a(relu);
      for (attn::index_t i = 0; i < rows * cols; ++i)
        CHECK(static_cast<float>(general.data()[i]) == static_cast<float>(out.data()[i]));
    }
  }
}

TEST_CASE_TEMPLATE("a linear layer's ReLU keeps a NaN, as max(x, 0) does", T, float, attn::bfloat16) {
  linear_layer<T> layer(4, 5);
  layer.bias(2) = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
  attn::tensor<T, attn::shape<m, n>> out(4, 5);
  layer.into(out, true);
  for (attn::index_t i = 0; i < 4; ++i) {
    CHECK(std::isnan(static_cast<float>(out(i, 2))));
    CHECK(static_cast<float>(out(i, 1)) >= 0.0f);
  }
}
