// Tests of include/attn/expr/contract.hpp: contraction over a named dimension, matmul, batched
// products, every operand layout (transposes), operands that are expressions.
#include <doctest/doctest.h>

#include <string>
#include <type_traits>

#include "../reference.hpp"

namespace {
using namespace attn::test;
using batch = attn::dim<"batch">;
using heads = attn::dim<"heads", 3>;
using tgt = attn::dim<"tgt">;
using src = attn::dim<"src">;
using d_k = attn::dim<"d_k", 5>;
using m_dim = attn::dim<"m">;
using k_dim = attn::dim<"k">;
using n_dim = attn::dim<"n">;

template <class T, class S>
attn::tensor<T, S> random_of(const attn::extents<S>& sizes) {
  attn::tensor<T, S> t(sizes);
  fill_random(t);
  return t;
}
}  // namespace

TEST_CASE_TEMPLATE("matrix products in all four layouts", T, float, double) {
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  if (std::is_same_v<T, float>) {
    const std::string path = attn::cpu_backend::dnnl_gemm_enabled() ? "oneDNN" : "Eigen/BLAS";
    MESSAGE("float products through " << path);
  }
  // Four small draws (sizes 1 and odd ones), then one large enough for the GEMM's threads.
  for (int draw = 0; draw < 5; ++draw) {
    const bool large = draw == 4;
    const attn::index_t m = large ? 301 : random_extent(), k = large ? 259 : random_extent() * 3,
                        n = large ? 263 : random_extent();
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    auto a_mk = random_of<T>(attn::extents<attn::shape<m_dim, k_dim>>(m, k));
    auto b_kn = random_of<T>(attn::extents<attn::shape<k_dim, n_dim>>(k, n));
    const auto ref = reference(attn::extents<attn::shape<m_dim, n_dim>>(m, n), [&](const auto& i) {
      double s = 0;
      for (attn::index_t kk = 0; kk < k; ++kk) s += (double)a_mk(i[0], kk) * b_kn(kk, i[1]);
      return s;
    });
    // The same matrices stored transposed.
    attn::tensor<T, attn::shape<k_dim, m_dim>> a_km(attn::permute<k_dim, m_dim>(a_mk));
    attn::tensor<T, attn::shape<n_dim, k_dim>> b_nk(attn::permute<n_dim, k_dim>(b_kn));

    auto c1 = attn::eval(attn::contract<k_dim>(a_mk, b_kn));
    static_assert(std::is_same_v<typename decltype(c1)::shape_type, attn::shape<m_dim, n_dim>>);
    CHECK(relative_error(c1.data(), ref) < tol);
    auto c2 = attn::eval(attn::contract<k_dim>(a_km, b_kn));
    CHECK(relative_error(c2.data(), ref) < tol);
    auto c3 = attn::eval(attn::contract<k_dim>(a_mk, b_nk));
    CHECK(relative_error(c3.data(), ref) < tol);
    auto c4 = attn::eval(attn::contract<k_dim>(a_km, b_nk));
    CHECK(relative_error(c4.data(), ref) < tol);
    auto c5 = attn::eval(attn::matmul(a_mk, b_kn));
    CHECK(relative_error(c5.data(), ref) < tol);
  }
}

TEST_CASE_TEMPLATE("products of 16-bit operands accumulate in float and round once", T, attn::bfloat16,
                   attn::float16) {
  // The reference in double from the same 16-bit inputs; float accumulation over k ≤ 51
  // products of numbers below 1 costs far less than 2⁻¹⁶ (the slack before the half unit).
  const double slack = std::ldexp(1.0, -16);
  for (int draw = 0; draw < 4; ++draw) {
    const attn::index_t m = random_extent(), k = random_extent() * 3, n = random_extent();
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    auto a_mk = random_of<T>(attn::extents<attn::shape<m_dim, k_dim>>(m, k));
    auto b_kn = random_of<T>(attn::extents<attn::shape<k_dim, n_dim>>(k, n));
    auto bias = random_of<T>(attn::extents<attn::shape<n_dim>>(n));
    const auto product = [&](const auto& i) {
      double s = 0;
      for (attn::index_t kk = 0; kk < k; ++kk) s += double(a_mk(i[0], kk)) * double(b_kn(kk, i[1]));
      return s;
    };
    const attn::extents<attn::shape<m_dim, n_dim>> mn(m, n);
    const auto ref = reference(mn, product);
    attn::tensor<T, attn::shape<k_dim, m_dim>> a_km(attn::permute<k_dim, m_dim>(a_mk));
    attn::tensor<T, attn::shape<n_dim, k_dim>> b_nk(attn::permute<n_dim, k_dim>(b_kn));
    CHECK(ulps_off(attn::eval(attn::contract<k_dim>(a_mk, b_kn)).data(), ref, slack) <= 0.5);
    CHECK(ulps_off(attn::eval(attn::contract<k_dim>(a_km, b_kn)).data(), ref, slack) <= 0.5);
    CHECK(ulps_off(attn::eval(attn::contract<k_dim>(a_mk, b_nk)).data(), ref, slack) <= 0.5);
    CHECK(ulps_off(attn::eval(attn::contract<k_dim>(a_km, b_nk)).data(), ref, slack) <= 0.5);
    // A linear layer's relu(x·W + b): the bias added to the float product, one rounding.
    const auto linear = attn::eval(attn::relu(attn::contract<k_dim>(a_mk, b_kn) + attn::broadcast(bias, mn)));
    CHECK(ulps_off(linear.data(), reference(mn, [&](const auto& i) { return std::max(0.0, product(i) + double(bias(i[1]))); }),
                   slack) <= 0.5);
    // An operand that is an expression, laid out for the GEMM first (×2 is exact in 16 bits).
    const auto scaled = attn::eval(attn::contract<k_dim>(a_mk * 2, b_kn));
    CHECK(ulps_off(scaled.data(), reference(mn, [&](const auto& i) { return 2 * product(i); }), slack) <= 0.5);
  }
}

TEST_CASE_TEMPLATE("16-bit attention products: operands in either layout and in neither", T, attn::bfloat16,
                   attn::float16) {
  // q stored [batch, tgt, heads, d_k] (heads not yet before tgt: widened, then laid out in
  // float), k as [batch, heads, src, d_k] (read transposed) and v as [batch, heads, src, d_k]
  // (read as it lies), each widened once; every product rounded once from float. Then k in
  // neither layout, and a product whose rows have no free dimension (one layout, not transposed).
  const double slack = std::ldexp(1.0, -16);
  for (int draw = 0; draw < 3; ++draw) {
    const attn::index_t b = random_extent(), t = random_extent(), s = random_extent();
    auto q = random_of<T>(attn::extents<attn::shape<batch, tgt, heads, d_k>>(b, t));
    auto k = random_of<T>(attn::extents<attn::shape<batch, heads, src, d_k>>(b, s));
    auto v = random_of<T>(attn::extents<attn::shape<batch, heads, src, d_k>>(b, s));
    const auto scores = attn::eval(attn::contract<d_k>(q, k));
    static_assert(std::is_same_v<typename decltype(scores)::shape_type, attn::shape<batch, heads, tgt, src>>);
    CHECK(ulps_off(scores.data(), reference(scores.extents(), [&](const auto& i) {
      double sum = 0;
      for (attn::index_t x = 0; x < 5; ++x) sum += double(q(i[0], i[2], i[1], x)) * double(k(i[0], i[1], i[3], x));
      return sum;
    }), slack) <= 0.5);
    auto p = random_of<T>(attn::extents<attn::shape<batch, heads, tgt, src>>(b, t, s));
    const auto out = attn::eval(attn::contract<src>(p, v));
    CHECK(ulps_off(out.data(), reference(out.extents(), [&](const auto& i) {
      double sum = 0;
      for (attn::index_t y = 0; y < s; ++y) sum += double(p(i[0], i[1], i[2], y)) * double(v(i[0], i[1], y, i[3]));
      return sum;
    }), slack) <= 0.5);
    auto k_by_source = random_of<T>(attn::extents<attn::shape<batch, src, heads, d_k>>(b, s));
    const auto scores_by_source = attn::eval(attn::contract<d_k>(q, k_by_source));
    static_assert(
        std::is_same_v<typename decltype(scores_by_source)::shape_type, attn::shape<batch, heads, tgt, src>>);
    CHECK(ulps_off(scores_by_source.data(), reference(scores_by_source.extents(), [&](const auto& i) {
      double sum = 0;
      for (attn::index_t x = 0; x < 5; ++x) sum += double(q(i[0], i[2], i[1], x)) * double(k_by_source(i[0], i[3], i[1], x));
      return sum;
    }), slack) <= 0.5);
    auto query = random_of<T>(attn::extents<attn::shape<batch, d_k>>(b));
    auto keys = random_of<T>(attn::extents<attn::shape<batch, src, d_k>>(b, s));
    const auto dots = attn::eval(attn::contract<d_k>(query, keys));
    static_assert(std::is_same_v<typename decltype(dots)::shape_type, attn::shape<batch, src>>);
    CHECK(ulps_off(dots.data(), reference(dots.extents(), [&](const auto& i) {
      double sum = 0;
      for (attn::index_t x = 0; x < 5; ++x) sum += double(query(i[0], x)) * double(keys(i[0], i[1], x));
      return sum;
    }), slack) <= 0.5);
  }
}

TEST_CASE("attention-shaped batched contractions: q·kᵀ and p·v") {
  for (int draw = 0; draw < 3; ++draw) {
    const attn::index_t b = random_extent(), t = random_extent(), s = random_extent();
    auto q = random_of<float>(attn::extents<attn::shape<batch, heads, tgt, d_k>>(b, t));
    auto k = random_of<float>(attn::extents<attn::shape<batch, heads, src, d_k>>(b, s));
    auto scores = attn::eval(attn::contract<d_k>(q, k));
    static_assert(std::is_same_v<decltype(scores)::shape_type, attn::shape<batch, heads, tgt, src>>);
    const auto ref = reference(scores.extents(), [&](const auto& i) {
      double sum = 0;
      for (attn::index_t x = 0; x < 5; ++x) sum += (double)q(i[0], i[1], i[2], x) * k(i[0], i[1], i[3], x);
      return sum;
    });
    CHECK(relative_error(scores.data(), ref) < 1e-5);

    auto v = random_of<float>(attn::extents<attn::shape<batch, heads, src, d_k>>(b, s));
    auto out = attn::eval(attn::contract<src>(scores, v));
    static_assert(std::is_same_v<decltype(out)::shape_type, attn::shape<batch, heads, tgt, d_k>>);
    const auto ref2 = reference(out.extents(), [&](const auto& i) {
      double sum = 0;
      for (attn::index_t x = 0; x < s; ++x) sum += (double)scores(i[0], i[1], i[2], x) * v(i[0], i[1], x, i[3]);
      return sum;
    });
    CHECK(relative_error(out.data(), ref2) < 1e-5);
  }
}

TEST_CASE("free dimensions on both sides, batch dimensions out of place, expression operands") {
  // x [batch, tgt, d_k] · w [d_k, heads]: batch and tgt are both rows of one GEMM.
  auto x = random_of<float>(attn::extents<attn::shape<batch, tgt, d_k>>(3, 4));
  auto w = random_of<float>(attn::extents<attn::shape<d_k, heads>>());
  auto y = attn::eval(attn::contract<d_k>(x * 2.0f, w));
  static_assert(std::is_same_v<decltype(y)::shape_type, attn::shape<batch, tgt, heads>>);
  const auto ref = reference(y.extents(), [&](const auto& i) {
    double s = 0;
    for (attn::index_t c = 0; c < 5; ++c) s += 2.0 * x(i[0], i[1], c) * w(c, i[2]);
    return s;
  });
  CHECK(relative_error(y.data(), ref) < 1e-5);

  // The batch dimension last in one operand: it is permuted into place first.
  auto p = random_of<float>(attn::extents<attn::shape<tgt, d_k, batch>>(4, 3));
  auto z = attn::eval(attn::contract<d_k>(x, p));
  // tgt is in both operands, so it is a batch dimension too: a batched dot product.
  static_assert(std::is_same_v<decltype(z)::shape_type, attn::shape<batch, tgt>>);
  const auto ref2 = reference(z.extents(), [&](const auto& i) {
    double s = 0;
    for (attn::index_t c = 0; c < 5; ++c) s += (double)x(i[0], i[1], c) * p(i[1], c, i[0]);
    return s;
  });
  CHECK(relative_error(z.data(), ref2) < 1e-5);
}

TEST_CASE("a contraction inside an elementwise expression, and into its own operand") {
  using row = attn::dim<"row">;
  auto a = random_of<float>(attn::extents<attn::shape<row, d_k>>(4));
  auto w = random_of<float>(attn::extents<attn::shape<d_k, n_dim>>(5));
  attn::tensor<float, attn::shape<row, n_dim>> out(4, 5);
  out = attn::relu(attn::contract<d_k>(a, w)) + 1.0f;
  const auto ref = reference(out.extents(), [&](const auto& i) {
    double s = 0;
    for (attn::index_t c = 0; c < 5; ++c) s += (double)a(i[0], c) * w(c, i[1]);
    return std::max(0.0, s) + 1.0;
  });
  CHECK(relative_error(out.data(), ref) < 1e-5);

  // sq = sq · I: the destination is also an operand, so the product goes through a temporary.
  using tmp = attn::dim<"tmp">;
  attn::tensor<float, attn::shape<tmp, n_dim>> identity(5, 5);
  for (attn::index_t i = 0; i < 5; ++i) identity(i, i) = 1.0f;
  attn::tensor<float, attn::shape<row, n_dim>> sq(4, 5);
  fill_random(sq);
  const attn::tensor<float, attn::shape<row, n_dim>> before = sq;
  sq = attn::contract<tmp>(attn::rename<n_dim, tmp>(sq), identity);
  for (attn::index_t i = 0; i < sq.size(); ++i) CHECK(sq.data()[i] == doctest::Approx(before.data()[i]));
}

TEST_CASE("contracting over an empty dimension gives zeros; mismatched sizes are rejected") {
  auto a = random_of<float>(attn::extents<attn::shape<m_dim, k_dim>>(3, 0));
  auto b = random_of<float>(attn::extents<attn::shape<k_dim, n_dim>>(0, 2));
  attn::tensor<float, attn::shape<m_dim, n_dim>> c(3, 2);
  c = c + 1.0f;
  c = attn::contract<k_dim>(a, b);
  for (attn::index_t i = 0; i < c.size(); ++i) CHECK(c.data()[i] == 0.0f);
  auto bad = random_of<float>(attn::extents<attn::shape<k_dim, n_dim>>(4, 2));
  try {
    (void)attn::contract<k_dim>(a, bad);
    FAIL("no error");
  } catch (const attn::extent_error& e) {
    CHECK(std::string(e.what()) == "attn::contract: dimension 'k' has extent 0 in one operand and 4 in the other");
  }
}

TEST_CASE("a contraction read as batches of matrix products: the layouts read in place and the sizes") {
  // q [batch, heads, tgt, d_k] · k [batch, heads, src, d_k] over d_k: attention's scores.
  const attn::tensor<float, attn::shape<batch, heads, tgt, d_k>> q(2, 7);
  const attn::tensor<float, attn::shape<batch, heads, src, d_k>> k(2, 4);
  const auto scores = attn::contract<d_k>(q, k);
  using form = attn::expr::matrix_form<std::remove_cvref_t<decltype(scores)>>;
  static_assert(std::is_same_v<form::a_rows_k, attn::shape<batch, heads, tgt, d_k>>);
  static_assert(std::is_same_v<form::a_k_rows, attn::shape<batch, heads, d_k, tgt>>);
  static_assert(std::is_same_v<form::b_k_cols, attn::shape<batch, heads, d_k, src>>);
  static_assert(std::is_same_v<form::b_cols_k, attn::shape<batch, heads, src, d_k>>);
  const form matrices(scores);
  CHECK(matrices.batches == 2 * 3);
  CHECK(matrices.m == 7);
  CHECK(matrices.n == 4);
  CHECK(matrices.k == 5);

  // No batch dimension, and a side with two free dimensions: x [batch, tgt, m] · w [m, n].
  const attn::tensor<float, attn::shape<batch, tgt, m_dim>> x(3, 2, 6);
  const attn::tensor<float, attn::shape<m_dim, n_dim>> w(6, 9);
  const auto product = attn::contract<m_dim>(x, w);
  using flat = attn::expr::matrix_form<std::remove_cvref_t<decltype(product)>>;
  static_assert(std::is_same_v<flat::a_rows_k, attn::shape<batch, tgt, m_dim>>);
  static_assert(std::is_same_v<flat::b_k_cols, attn::shape<m_dim, n_dim>>);
  const flat rows(product);
  CHECK(rows.batches == 1);
  CHECK(rows.m == 3 * 2);
  CHECK(rows.n == 9);
  CHECK(rows.k == 6);
}
