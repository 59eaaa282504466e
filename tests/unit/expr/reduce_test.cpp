// Tests of include/attn/expr/reduce.hpp: sum, max and mean over first, middle and last dimensions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "../reference.hpp"

namespace {
using namespace attn::test;
using batch = attn::dim<"batch">;
using len = attn::dim<"len">;
using d_small = attn::dim<"d_small", 3>;
using s3 = attn::shape<batch, len, d_small>;

/// Reference reduction of t over dimension position `axis`.
template <class T, class Out, class Combine>
std::vector<double> reduce_reference(const attn::tensor<T, s3>& t, const Out& out, std::size_t axis,
                                     double init, Combine combine, bool mean) {
  return reference(out.extents(), [&](const auto& index) {
    double acc = init;
    std::array<attn::index_t, 3> full{};
    for (attn::index_t k = 0; k < t.extents()[axis]; ++k) {
      for (std::size_t d = 0, j = 0; d < 3; ++d) full[d] = d == axis ? k : index[j++];
      acc = combine(acc, static_cast<double>(at(t, full)));
    }
    return mean ? acc / static_cast<double>(t.extents()[axis]) : acc;
  });
}
}  // namespace

TEST_CASE_TEMPLATE("sum, max and mean over each dimension match loops", T, float, double) {
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  auto plus = [](double a, double b) { return a + b; };
  auto larger = [](double a, double b) { return std::max(a, b); };
  const double lowest = -std::numeric_limits<double>::infinity();
  for (int draw = 0; draw < 5; ++draw) {
    attn::tensor<T, s3> x(random_extent(), random_extent() * 9);
    fill_random(x);
    CAPTURE(x.extents().to_string());

    auto sb = attn::eval(attn::sum<batch>(x));
    static_assert(std::is_same_v<typename decltype(sb)::shape_type, attn::shape<len, d_small>>);
    CHECK(relative_error(sb.data(), reduce_reference(x, sb, 0, 0, plus, false)) < tol);
    auto sl = attn::eval(attn::sum<len>(x));
    CHECK(relative_error(sl.data(), reduce_reference(x, sl, 1, 0, plus, false)) < tol);
    auto sd = attn::eval(attn::sum<d_small>(x));
    CHECK(relative_error(sd.data(), reduce_reference(x, sd, 2, 0, plus, false)) < tol);

    auto mb = attn::eval(attn::max<batch>(x));
    CHECK(relative_error(mb.data(), reduce_reference(x, mb, 0, lowest, larger, false)) == 0);
    auto ml = attn::eval(attn::max<len>(x));
    CHECK(relative_error(ml.data(), reduce_reference(x, ml, 1, lowest, larger, false)) == 0);
    auto md = attn::eval(attn::max<d_small>(x));
    CHECK(relative_error(md.data(), reduce_reference(x, md, 2, lowest, larger, false)) == 0);

    auto ab = attn::eval(attn::mean<batch>(x));
    CHECK(relative_error(ab.data(), reduce_reference(x, ab, 0, 0, plus, true)) < tol);
    auto al = attn::eval(attn::mean<len>(x));
    CHECK(relative_error(al.data(), reduce_reference(x, al, 1, 0, plus, true)) < tol);
    auto ad = attn::eval(attn::mean<d_small>(x));
    CHECK(relative_error(ad.data(), reduce_reference(x, ad, 2, 0, plus, true)) < tol);
  }
}

TEST_CASE("a reduction of an expression, and inside an expression") {
  attn::tensor<float, s3> x(4, 6);
  fill_random(x);
  // Row softmax: the max and the sum are evaluated once each, then broadcast back.
  auto shifted = x - attn::broadcast_like(attn::max<d_small>(x), x);
  auto e = attn::exp(shifted);
  auto softmax = attn::eval(e / attn::broadcast_like(attn::sum<d_small>(e), x));
  const auto ref = reference(x.extents(), [&](const auto& index) {
    double m = -1e30, s = 0;
    for (attn::index_t k = 0; k < 3; ++k) m = std::max(m, (double)x(index[0], index[1], k));
    for (attn::index_t k = 0; k < 3; ++k) s += std::exp(x(index[0], index[1], k) - m);
    return std::exp(x(index[0], index[1], index[2]) - m) / s;
  });
  CHECK(relative_error(softmax.data(), ref) < 1e-6);
  auto total = attn::eval(attn::sum<batch>(attn::sum<len>(attn::sum<d_small>(x * 2.0f))));
  static_assert(std::is_same_v<decltype(total)::shape_type, attn::shape<>>);
  double expected = 0;
  for (attn::index_t i = 0; i < x.size(); ++i) expected += 2.0 * x.data()[i];
  CHECK(total.data()[0] == doctest::Approx(expected).epsilon(1e-5));
}

TEST_CASE("reducing into one of the operands is safe") {
  using row = attn::dim<"row">;
  attn::tensor<float, attn::shape<row, d_small>> x(5);
  fill_random(x);
  attn::tensor<float, attn::shape<row>> totals(5);
  totals = attn::sum<d_small>(x);
  for (attn::index_t r = 0; r < 5; ++r)
    CHECK(totals(r) == doctest::Approx(x(r, 0) + x(r, 1) + x(r, 2)));
}

TEST_CASE_TEMPLATE("a sum over the leading axis of stored numbers (a bias's gradient) matches loops", T, float,
                   double) {
  // cpu/reduce.hpp adds such rows in order, each thread a range of columns: sizes of one piece,
  // of several threads' pieces, with no rows, and over rows merged from two dimensions.
  using rows = attn::dim<"rows">;
  using cols = attn::dim<"cols">;
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  for (const auto& [r, c] : {std::pair<attn::index_t, attn::index_t>{1, 1}, {7, 3}, {300, 257}, {1000, 1000}, {0, 5}}) {
    CAPTURE(r);
    CAPTURE(c);
    attn::tensor<T, attn::shape<rows, cols>> x(r, c);
    fill_random(x);
    const auto ref = reference(attn::extents<attn::shape<cols>>(c), [&](const auto& j) {
      double s = 0;
      for (attn::index_t i = 0; i < r; ++i) s += double(x(i, j[0]));
      return s;
    });
    const auto sums = attn::eval(attn::sum<rows>(x));
    if (r == 0) CHECK(std::all_of(sums.data(), sums.data() + c, [](T v) { return v == T(0); }));
    else CHECK(relative_error(sums.data(), ref) < tol);
  }
  attn::tensor<T, s3> y(4, 50);  // [batch, len, 3] summed over batch × len, as grad/linear.hpp does
  fill_random(y);
  const auto merged = attn::eval(attn::sum<rows>(attn::merge<batch, len, rows>(y)));
  const auto ref = reference(attn::extents<attn::shape<d_small>>(), [&](const auto& j) {
    double s = 0;
    for (attn::index_t b = 0; b < 4; ++b)
      for (attn::index_t l = 0; l < 50; ++l) s += double(y(b, l, j[0]));
    return s;
  });
  CHECK(relative_error(merged.data(), ref) < tol);
}

TEST_CASE_TEMPLATE("16-bit sums, maxima and means: reduced in float, each rounded once", T, attn::bfloat16,
                   attn::float16) {
  // cpu/reduce.hpp reduces a 16-bit tensor into float and rounds the results over the array; a
  // sum over the leading axis adds rows in order, so its bits are those of a float loop.
  using rows = attn::dim<"rows">;
  using cols = attn::dim<"cols">;
  const auto bits = [](T v) { return v.bits; };
  for (const auto& [r, c] : {std::pair<attn::index_t, attn::index_t>{1, 1}, {7, 3}, {300, 257}, {0, 5}}) {
    CAPTURE(r);
    CAPTURE(c);
    attn::tensor<T, attn::shape<rows, cols>> x(r, c);
    fill_random(x, -4.0, 4.0);
    const auto sums = attn::eval(attn::sum<rows>(x));
    attn::index_t wrong = 0;
    for (attn::index_t j = 0; j < c; ++j) {
      float s = 0;
      for (attn::index_t i = 0; i < r; ++i) s += float(x(i, j));
      wrong += bits(sums(j)) != bits(T(s));
    }
    CHECK(wrong == 0);
  }
  // Rows whose order shows through the rounding: in order, 256's float swallows each 2⁻¹⁷ and
  // the last row brings the sum to a tie, which rounds to even (256); added the other way, the
  // small rows count, and the sum rounds up.
  {
    const float last = std::is_same_v<T, attn::bfloat16> ? 1.0f : 0.125f;  // half a unit at 256
    attn::tensor<T, attn::shape<rows, cols>> x(258, 1);
    x(0, 0) = T(256.0f);
    for (attn::index_t i = 1; i < 257; ++i) x(i, 0) = T(std::ldexp(1.0f, -17));
    x(257, 0) = T(last);
    CHECK(float(attn::eval(attn::sum<rows>(x))(0)) == 256.0f);
  }
  // Over the other axes Eigen adds in an order of its own: within a 16-bit unit of the sum, and
  // maxima exactly.
  attn::tensor<T, s3> y(5, 40);
  fill_random(y, -4.0, 4.0);
  const double unit = std::is_same_v<T, attn::bfloat16> ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  const auto over_len = attn::eval(attn::sum<len>(y));
  const auto mean_last = attn::eval(attn::mean<d_small>(y));
  const auto max_len = attn::eval(attn::max<len>(y));
  for (attn::index_t b = 0; b < 5; ++b) {
    for (attn::index_t d = 0; d < 3; ++d) {
      double s = 0, m = -INFINITY;
      for (attn::index_t l = 0; l < 40; ++l) s += double(y(b, l, d)), m = std::max(m, double(y(b, l, d)));
      CHECK(std::abs(double(over_len(b, d)) - s) <= unit * std::abs(s) + 1e-4);
      CHECK(double(max_len(b, d)) == m);
    }
    for (attn::index_t l = 0; l < 40; ++l) {
      double s = 0;
      for (attn::index_t d = 0; d < 3; ++d) s += double(y(b, l, d));
      CHECK(std::abs(double(mean_last(b, l)) - s / 3) <= unit * std::abs(s / 3) + 1e-4);
    }
  }
}

TEST_CASE_TEMPLATE("reductions of an empty batch: a sum 0, a maximum -inf, a mean NaN, broadcast operands too", T,
                   float, double, attn::bfloat16) {
  // No sentences: what a reduction over the batch makes of nothing. The operand broadcast over
  // the batch has no elements, which Eigen's broadcast would assert on if it were lowered.
  using len_d = attn::shape<len, d_small>;
  attn::tensor<T, s3> x(0, 4);
  attn::tensor<T, attn::shape<batch, d_small>> per_sentence(0);
  const auto sentences = attn::broadcast<s3>(per_sentence, x.extents());
  const auto sum = attn::eval(attn::sum<batch>(x + sentences));
  const auto max = attn::eval(attn::max<batch>(x + sentences));
  const auto mean = attn::eval(attn::mean<batch>(x * sentences));
  static_assert(std::is_same_v<typename decltype(sum)::shape_type, len_d>);
  REQUIRE(sum.size() == 12);
  for (attn::index_t i = 0; i < sum.size(); ++i) {
    CHECK(float(sum.data()[i]) == 0.0f);
    CHECK(float(max.data()[i]) == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(float(mean.data()[i])));
  }
  attn::tensor<T, attn::shape<len>> lengths(4);
  lengths = attn::sum<d_small>(attn::sum<batch>(x));  // a sum over the batch, then over d_small
  for (attn::index_t i = 0; i < 4; ++i) CHECK(float(lengths(i)) == 0.0f);
  const auto none = attn::eval(x + sentences);
  CHECK(none.size() == 0);
}
