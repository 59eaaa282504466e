// Tests of include/attn/cpu/gemm.hpp: c = alpha · op(a) · op(b) + beta · c against a plain
// loop in double, for both element types, every pair of transpositions, the single row and
// column that go to gemv, an empty contraction, beta 0 over NaN, a single number as Eigen's dot;
// and, built with BLAS, the numbers of Eigen's product wherever it called the same routines.
#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include <Eigen/Core>

#include <attn/cpu/gemm.hpp>

namespace {
using attn::index_t;

struct product_case {
  index_t m, n, k;
};

template <class T>
std::vector<T> random_values(index_t count, std::mt19937& random) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<T> values(static_cast<std::size_t>(count));
  for (auto& value : values) value = T(uniform(random));
  return values;
}

/// op(x)[i, j] for x stored row-major as [rows, cols] of op(x), or as its transpose.
template <class T>
double element(const std::vector<T>& x, bool transposed, index_t rows, index_t cols, index_t i, index_t j) {
  return transposed ? double(x[std::size_t(j * rows + i)]) : double(x[std::size_t(i * cols + j)]);
}

template <class T>
void check_against_loop(product_case size, bool a_transposed, bool b_transposed, T alpha, T beta) {
  const auto [m, n, k] = size;
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(a_transposed);
  CAPTURE(b_transposed);
  CAPTURE(alpha);
  CAPTURE(beta);
  std::mt19937 random(unsigned(m * 131 + n * 17 + k));
  const auto a = random_values<T>(m * k, random);
  const auto b = random_values<T>(k * n, random);
  auto c = random_values<T>(m * n, random);
  if (beta == T(0)) std::fill(c.begin(), c.end(), std::numeric_limits<T>::quiet_NaN());  // never read
  const auto before = c;
  attn::cpu_backend::gemm(c.data(), a.data(), a_transposed, b.data(), b_transposed, m, n, k, alpha, beta);
  const double tolerance = (std::is_same_v<T, float> ? 1e-5 : 1e-13) * double(k + 1);
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      double exact = 0;
      for (index_t p = 0; p < k; ++p)
        exact += element(a, a_transposed, m, k, i, p) * element(b, b_transposed, k, n, p, j);
      exact = double(alpha) * exact + (beta == T(0) ? 0.0 : double(beta) * double(before[std::size_t(i * n + j)]));
      CHECK(double(c[std::size_t(i * n + j)]) == doctest::Approx(exact).epsilon(tolerance).scale(1.0));
    }
}

const product_case sizes[] = {
    {1, 1, 1}, {1, 1, 7}, {1, 9, 5}, {9, 1, 5}, {1, 40, 33}, {40, 1, 33}, {2, 3, 4}, {17, 13, 29}, {64, 96, 80},
};
}  // namespace

TEST_CASE_TEMPLATE("cpu::gemm: c = alpha · op(a) · op(b) + beta · c for every transposition, row and column", T,
                   float, double) {
  for (const auto& size : sizes)
    for (const bool a_transposed : {false, true})
      for (const bool b_transposed : {false, true})
        for (const auto& [alpha, beta] : {std::pair{T(1), T(0)}, std::pair{T(0.5), T(1)}, std::pair{T(-2), T(0.25)}})
          check_against_loop<T>(size, a_transposed, b_transposed, alpha, beta);
}

TEST_CASE_TEMPLATE("cpu::gemm: an empty contraction leaves beta · c, and an empty c is left alone", T, float,
                   double) {
  std::vector<T> c{1, std::numeric_limits<T>::quiet_NaN(), 3, 4};
  attn::cpu_backend::gemm<T>(c.data(), nullptr, false, nullptr, true, 2, 2, 0, T(1), T(0));
  CHECK(c == std::vector<T>{0, 0, 0, 0});
  c = {1, 2, 3, 4};
  attn::cpu_backend::gemm<T>(c.data(), nullptr, true, nullptr, false, 2, 2, 0, T(1), T(0.5));
  CHECK(c == std::vector<T>{0.5, 1, 1.5, 2});
  attn::cpu_backend::gemm<T>(c.data(), nullptr, false, nullptr, false, 0, 2, 3, T(1), T(0));
  attn::cpu_backend::gemm<T>(c.data(), nullptr, false, nullptr, false, 2, 0, 3, T(1), T(0));
  CHECK(c == std::vector<T>{0.5, 1, 1.5, 2});
}

// The fused attention kernel's backward counts on it: over one key, dP = dO·Vᵀ is this product,
// and D = dO·O (O = V there) is Eigen's dot of the two rows, which must be the same sum for dP − D
// to be exactly 0. BLAS's gemv sums in another order (the emulated fused-attention tests of one
// key failed with it).
TEST_CASE_TEMPLATE("cpu::gemm: a single number is Eigen's dot of the row and the column, to the bit", T, float,
                   double) {
  using vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  std::mt19937 random(11);
  for (const index_t k : {1, 7, 32, 128, 1000}) {
    const auto a = random_values<T>(k, random);
    const auto b = random_values<T>(k, random);
    T c = std::numeric_limits<T>::quiet_NaN();
    attn::cpu_backend::gemm(&c, a.data(), false, b.data(), true, 1, 1, k);
    CAPTURE(k);
    CHECK(c == Eigen::Map<const vector>(a.data(), k).dot(Eigen::Map<const vector>(b.data(), k)));
  }
}

#if defined(EIGEN_USE_BLAS)
// Where Eigen's product called BLAS (sides summing to 20 or more) with alpha 1, gemm makes the
// same calls: the contractions' numbers did not change. A single row or column goes to gemv in
// both (Eigen copies a strided one first), a single number to the dot above when its row and
// column are contiguous (a not transposed, b transposed: the fused kernel's dP), and beta 1
// accumulates as Eigen's +=.
TEST_CASE_TEMPLATE("cpu::gemm: built with BLAS, the numbers of Eigen's product wherever it called BLAS", T, float,
                   double) {
  using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::mt19937 random(7);
  const product_case cases[] = {{5, 7, 9}, {17, 13, 29}, {128, 64, 256}, {1, 40, 33}, {40, 1, 33}, {1, 1, 64}};
  for (const auto& [m, n, k] : cases)
    for (const bool a_transposed : {false, true})
      for (const bool b_transposed : {false, true})
        for (const bool accumulate : {false, true}) {
          if (m == 1 && n == 1 && (a_transposed || !b_transposed)) continue;  // Eigen summed a strided dot in order
          const auto a = random_values<T>(m * k, random);
          const auto b = random_values<T>(k * n, random);
          const Eigen::Map<const matrix> a_map(a.data(), a_transposed ? k : m, a_transposed ? m : k);
          const Eigen::Map<const matrix> b_map(b.data(), b_transposed ? n : k, b_transposed ? k : n);
          const matrix start = Eigen::Map<const matrix>(random_values<T>(m * n, random).data(), m, n);
          matrix eigen = start;
          if (!accumulate) eigen.setConstant(std::numeric_limits<T>::quiet_NaN());
          const auto product = [&](auto&& lhs, auto&& rhs) {
            if (accumulate) eigen.noalias() += lhs * rhs;
            else eigen.noalias() = lhs * rhs;
          };
          if (!a_transposed && !b_transposed) product(a_map, b_map);
          else if (!a_transposed) product(a_map, b_map.transpose());
          else if (!b_transposed) product(a_map.transpose(), b_map);
          else product(a_map.transpose(), b_map.transpose());
          matrix ours = start;
          attn::cpu_backend::gemm(ours.data(), a.data(), a_transposed, b.data(), b_transposed, m, n, k, T(1),
                                  accumulate ? T(1) : T(0));
          CAPTURE(m);
          CAPTURE(n);
          CAPTURE(a_transposed);
          CAPTURE(b_transposed);
          CAPTURE(accumulate);
          CHECK(ours == eigen);
        }
}

TEST_CASE("cpu::gemm: a side longer than BLAS counts is refused, not wrapped around") {
  const index_t too_long = index_t(INT_MAX) + 1;
  CHECK_THROWS_AS(attn::cpu_backend::gemm<float>(nullptr, nullptr, false, nullptr, false, too_long, 2, 2),
                  std::length_error);
  CHECK_THROWS_WITH(attn::cpu_backend::gemm<double>(nullptr, nullptr, false, nullptr, false, 2, 2, too_long),
                    doctest::Contains("longer than BLAS counts"));
}
#endif
