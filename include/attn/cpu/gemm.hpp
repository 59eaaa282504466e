// One row-major matrix product, c = alpha · op(a) · op(b) + beta · c, for the CPU backend's
// contractions (contract.hpp) and the fused attention kernel's tiles (fused_attention.hpp).
//
// Built with OpenBLAS (-DEIGEN_USE_BLAS, the `blas` option), the product is one call of BLAS's
// gemm, or gemv when a side is a single row or column, and a dot product for a single number:
// with alpha 1 and a product whose sides sum to 20 or more, the calls Eigen's product made, and
// its numbers (tests/unit/cpu/gemm_test.cpp). Eigen differed in the last place elsewhere: it
// multiplied smaller products with loops of its own (contract.hpp keeps those for its small
// products), folded an alpha into a single row before gemv, and summed a single number's terms
// one by one when its row or column was strided. The fused attention kernel's backward relies on
// the dot: over one key, dO·Vᵀ is the same sum as D = dO·O, and softmax's backward (dP − D) is
// exactly 0. Calling BLAS directly spares every translation unit Eigen's product templates:
// each product expression instantiated Eigen's small-size loops, its matrix-vector branches and
// its BLAS binding, and a model's contractions and the fused kernel's tiles took a tenth of the
// compile time of DESIGN's base-model program (docs/model.md, "Compile time"). Without BLAS,
// and for other element types, Eigen multiplies.
#pragma once

#include <climits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <Eigen/Core>

#include "../core/config.hpp"

namespace attn::cpu_backend {

namespace detail {

/// c = alpha · op(a) · op(b) + beta · c by Eigen's product (its own GEMM, or BLAS behind it).
template <class T>
void eigen_gemm(T* c, const T* a, bool a_transposed, const T* b, bool b_transposed, index_t m, index_t n, index_t k,
                T alpha, T beta) {
  using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<matrix> c_map(c, m, n);
  const Eigen::Map<const matrix> a_map(a, a_transposed ? k : m, a_transposed ? m : k);
  const Eigen::Map<const matrix> b_map(b, b_transposed ? n : k, b_transposed ? k : n);
  if (beta == T(0)) c_map.setZero();
  else if (beta != T(1)) c_map *= beta;
  if (!a_transposed && !b_transposed) c_map.noalias() += alpha * (a_map * b_map);
  else if (!a_transposed) c_map.noalias() += alpha * (a_map * b_map.transpose());
  else if (!b_transposed) c_map.noalias() += alpha * (a_map.transpose() * b_map);
  else c_map.noalias() += alpha * (a_map.transpose() * b_map.transpose());
}

#if defined(EIGEN_USE_BLAS)
template <class T>
inline constexpr bool blas_type = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// BLAS counts in int: a side past INT_MAX is refused with the product's sizes rather than
/// wrapped around.
inline int blas_size(index_t size, index_t m, index_t n, index_t k) {
  if (size > INT_MAX)
    throw std::length_error("attn: a [" + std::to_string(m) + ", " + std::to_string(k) + "] x [" + std::to_string(k) +
                            ", " + std::to_string(n) + "] product has a side longer than BLAS counts (2^31 - 1)");
  return static_cast<int>(size);
}

inline void blas_gemm(char ta, char tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                      int ldb, float beta, float* c, int ldc) {
  sgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
}
inline void blas_gemm(char ta, char tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                      int ldb, double beta, double* c, int ldc) {
  dgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
}
inline void blas_gemv(char t, int m, int n, float alpha, const float* a, int lda, const float* x, float beta,
                      float* y) {
  const int one = 1;
  sgemv_(&t, &m, &n, &alpha, a, &lda, x, &one, &beta, y, &one);
}
inline void blas_gemv(char t, int m, int n, double alpha, const double* a, int lda, const double* x, double beta,
                      double* y) {
  const int one = 1;
  dgemv_(&t, &m, &n, &alpha, a, &lda, x, &one, &beta, y, &one);
}
#endif

}  // namespace detail

/// c [m, n] = alpha · op(a) · op(b) + beta · c, every matrix row-major and stored whole (its rows
/// adjacent): a is [m, k] (a_transposed: stored as [k, m]), b is [k, n] (b_transposed: stored as
/// [n, k]). beta 0 overwrites c, whatever it held.
template <class T>
void gemm(T* c, const T* a, bool a_transposed, const T* b, bool b_transposed, index_t m, index_t n, index_t k,
          T alpha = T(1), T beta = T(0)) {
  if (m == 0 || n == 0) return;
  if (m == 1 && n == 1) {  // an inner product: Eigen's dot of the two contiguous vectors
    using vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
    const T dot = Eigen::Map<const vector>(a, k).dot(Eigen::Map<const vector>(b, k));
    c[0] = beta == T(0) ? alpha * dot : alpha * dot + beta * c[0];
    return;
  }
#if defined(EIGEN_USE_BLAS)
  if constexpr (detail::blas_type<T>) {
    if (k == 0) {  // c = beta · c, as BLAS leaves it
      for (index_t i = 0; i < m * n; ++i) c[i] = beta == T(0) ? T(0) : beta * c[i];
      return;
    }
    using detail::blas_size;
    const int rows = blas_size(m, m, n, k), cols = blas_size(n, m, n, k), depth = blas_size(k, m, n, k);
    // BLAS is column-major: the row-major c is the column-major cᵀ = op(b)ᵀ · op(a)ᵀ, where a
    // row-major matrix stored as [r, s] is the column-major [s, r] with leading dimension s.
    if (n == 1) {  // c's one column: op(a) · op(b)'s one column, which is stored whole either way
      if (a_transposed) detail::blas_gemv('N', rows, depth, alpha, a, rows, b, beta, c);
      else detail::blas_gemv('T', depth, rows, alpha, a, depth, b, beta, c);
    } else if (m == 1) {  // c's one row: op(b)ᵀ · op(a)'s one row
      if (b_transposed) detail::blas_gemv('T', depth, cols, alpha, b, depth, a, beta, c);
      else detail::blas_gemv('N', cols, depth, alpha, b, cols, a, beta, c);
    } else {
      detail::blas_gemm(b_transposed ? 'T' : 'N', a_transposed ? 'T' : 'N', cols, rows, depth, alpha, b,
                        b_transposed ? depth : cols, a, a_transposed ? rows : depth, beta, c, cols);
    }
    return;
  }
#endif
  detail::eigen_gemm(c, a, a_transposed, b, b_transposed, m, n, k, alpha, beta);
}

}  // namespace attn::cpu_backend
