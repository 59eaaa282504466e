// Contractions: attn's `matmul` / `contract` against the Eigen product they lower to and
// against OpenBLAS's sgemm called directly, for square products and for attention's batch of
// per-head score products q·kᵀ.
//
// Build twice to compare GEMM engines: with -DEIGEN_USE_BLAS (Meson's `blas` option on) attn
// and raw Eigen both end in OpenBLAS's sgemm; without it, in Eigen's own GEMM. The cblas
// rows call OpenBLAS either way (when ATTN_BENCH_CBLAS is defined), as the ceiling.

#include <cstddef>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <benchmark/benchmark.h>

#ifdef ATTN_BENCH_CBLAS
#include <cblas.h>
#endif

#include <attn/attn.hpp>

#include "bench_common.hpp"

namespace {

using index = std::ptrdiff_t;

// Legend: m, k, n a product [m, k]·[k, n]; batch, heads, tgt, src, d_k attention's scores
// [batch, heads, tgt, src] = q [batch, heads, tgt, d_k] · k [batch, heads, src, d_k]ᵀ.
using m_dim = attn::dim<"m">;
using k_dim = attn::dim<"k">;
using n_dim = attn::dim<"n">;
using batch = attn::dim<"batch">;
using heads = attn::dim<"heads", 8>;
using tgt = attn::dim<"tgt">;
using src = attn::dim<"src">;
using d_k = attn::dim<"d_k", 64>;

constexpr index batch_size = 8;
constexpr index length = 128;  // tgt = src = 128 positions

template <class T>
using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using matrix_map = Eigen::Map<matrix<T>>;
template <class T>
using const_matrix_map = Eigen::Map<const matrix<T>>;

void flops_counter(benchmark::State& state, double flops) {
  attn_bench::set_flops(state, flops);
#ifdef EIGEN_USE_BLAS
  state.SetLabel("blas on");
#else
  state.SetLabel("blas off");
#endif
}

/// The check each attn benchmark runs once before timing: against a plain Eigen product
/// evaluated in double, relative to the size of the result.
template <class T>
void check(benchmark::State& state, const T* got, const T* a, const T* b, index m, index k,
           index n, bool b_transposed) {
  const Eigen::MatrixXd a_d = const_matrix_map<T>(a, m, k).template cast<double>();
  const Eigen::MatrixXd b_d = b_transposed
                                  ? Eigen::MatrixXd(const_matrix_map<T>(b, n, k).template cast<double>().transpose())
                                  : Eigen::MatrixXd(const_matrix_map<T>(b, k, n).template cast<double>());
  const Eigen::MatrixXd want = a_d * b_d;
  const Eigen::MatrixXd have = const_matrix_map<T>(got, m, n).template cast<double>();
  const double error = (have - want).cwiseAbs().maxCoeff() / (1.0 + want.cwiseAbs().maxCoeff());
  state.counters["max_rel_err"] = error;
  if (!(error < 1e-4))
    state.SkipWithError(("result differs from the reference by " + std::to_string(error)).c_str());
}

// ---------------------------------------------------------------------------------------
// Square products: c [m, n] = a [m, k] · b [k, n], m = k = n; 2·n³ FLOP an iteration.

/// attn::matmul(a, b): both operands already [rows, k] and [k, cols], used in place.
template <class T>
void BM_square_attn_matmul(benchmark::State& state) {
  const index s = state.range(0);
  attn::tensor<T, attn::shape<m_dim, k_dim>> a(s, s);
  attn::tensor<T, attn::shape<k_dim, n_dim>> b(s, s);
  attn::tensor<T, attn::shape<m_dim, n_dim>> c(s, s);
  attn_bench::fill(a.data(), a.size(), 1);
  attn_bench::fill(b.data(), b.size(), 2);
  c = attn::matmul(a, b);
  if (s <= 1024) check(state, c.data(), a.data(), b.data(), s, s, s, false);
  for (auto _ : state) {
    c = attn::matmul(a, b);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  flops_counter(state, 2.0 * static_cast<double>(s) * static_cast<double>(s) * static_cast<double>(s));
}

/// attn::contract<k>(a, b) with b stored [n, k]: the transposed operand, as in q·kᵀ.
template <class T>
void BM_square_attn_contract_bt(benchmark::State& state) {
  const index s = state.range(0);
  attn::tensor<T, attn::shape<m_dim, k_dim>> a(s, s);
  attn::tensor<T, attn::shape<n_dim, k_dim>> b(s, s);
  attn::tensor<T, attn::shape<m_dim, n_dim>> c(s, s);
  attn_bench::fill(a.data(), a.size(), 1);
  attn_bench::fill(b.data(), b.size(), 2);
  c = attn::contract<k_dim>(a, b);
  if (s <= 1024) check(state, c.data(), a.data(), b.data(), s, s, s, true);
  for (auto _ : state) {
    c = attn::contract<k_dim>(a, b);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  flops_counter(state, 2.0 * static_cast<double>(s) * static_cast<double>(s) * static_cast<double>(s));
}

/// What attn lowers to: Eigen maps of row-major storage, `c.noalias() = a * b`.
template <class T, bool BTransposed>
void BM_square_eigen(benchmark::State& state) {
  const index s = state.range(0);
  std::vector<T> a(static_cast<std::size_t>(s * s)), b(a.size()), c(a.size());
  attn_bench::fill(a.data(), s * s, 1);
  attn_bench::fill(b.data(), s * s, 2);
  const_matrix_map<T> a_map(a.data(), s, s), b_map(b.data(), s, s);
  matrix_map<T> c_map(c.data(), s, s);
  for (auto _ : state) {
    if constexpr (BTransposed) c_map.noalias() = a_map * b_map.transpose();
    else c_map.noalias() = a_map * b_map;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  flops_counter(state, 2.0 * static_cast<double>(s) * static_cast<double>(s) * static_cast<double>(s));
}

#ifdef ATTN_BENCH_CBLAS
/// The ceiling: OpenBLAS's sgemm called directly.
template <bool BTransposed>
void BM_square_cblas(benchmark::State& state) {
  const index s = state.range(0);
  const int n = static_cast<int>(s);
  std::vector<float> a(static_cast<std::size_t>(s * s)), b(a.size()), c(a.size());
  attn_bench::fill(a.data(), s * s, 1);
  attn_bench::fill(b.data(), s * s, 2);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, BTransposed ? CblasTrans : CblasNoTrans, n, n, n,
                1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  attn_bench::set_flops(state, 2.0 * static_cast<double>(s) * static_cast<double>(s) * static_cast<double>(s));
  state.SetLabel("openblas");
}
#endif

// ---------------------------------------------------------------------------------------
// Attention's scores: 64 products [128, 64]·[64, 128], 2·64·128·128·64 FLOP an iteration.

constexpr double batched_flops =
    2.0 * batch_size * heads::extent * length * length * d_k::extent;

template <class T>
void BM_scores_attn(benchmark::State& state) {
  attn::tensor<T, attn::shape<batch, heads, tgt, d_k>> q(batch_size, length);
  attn::tensor<T, attn::shape<batch, heads, src, d_k>> k(batch_size, length);
  attn::tensor<T, attn::shape<batch, heads, tgt, src>> scores(batch_size, length, length);
  attn_bench::fill(q.data(), q.size(), 1);
  attn_bench::fill(k.data(), k.size(), 2);
  scores = attn::contract<d_k>(q, k);
  const index per = length * d_k::extent;
  for (index i = 0; i < batch_size * heads::extent && !state.error_occurred(); ++i)
    check(state, scores.data() + i * length * length, q.data() + i * per, k.data() + i * per,
          length, d_k::extent, length, true);
  for (auto _ : state) {
    scores = attn::contract<d_k>(q, k);
    benchmark::DoNotOptimize(scores.data());
    benchmark::ClobberMemory();
  }
  flops_counter(state, batched_flops);
}

/// A loop of Eigen products, one per (batch, head); in turn (each product free to thread
/// itself), or one product per OpenMP thread.
template <class T, bool Parallel>
void BM_scores_eigen_loop(benchmark::State& state) {
  constexpr index count = batch_size * heads::extent;
  constexpr index per = length * d_k::extent;
  std::vector<T> q(static_cast<std::size_t>(count * per)), k(q.size()),
      scores(static_cast<std::size_t>(count * length * length));
  attn_bench::fill(q.data(), count * per, 1);
  attn_bench::fill(k.data(), count * per, 2);
  auto product = [&](index i) {
    const_matrix_map<T> q_i(q.data() + i * per, length, d_k::extent);
    const_matrix_map<T> k_i(k.data() + i * per, length, d_k::extent);
    matrix_map<T> s_i(scores.data() + i * length * length, length, length);
    s_i.noalias() = q_i * k_i.transpose();
  };
  for (auto _ : state) {
    if constexpr (Parallel) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
      for (index i = 0; i < count; ++i) product(i);
    } else {
      for (index i = 0; i < count; ++i) product(i);
    }
    benchmark::DoNotOptimize(scores.data());
    benchmark::ClobberMemory();
  }
  flops_counter(state, batched_flops);
}

void squares(benchmark::internal::Benchmark* b) {
  attn_bench::timing(b->Arg(512)->Arg(1024)->Arg(2048))->Unit(benchmark::kMillisecond);
}

BENCHMARK_TEMPLATE(BM_square_attn_matmul, float)->Apply(squares);
BENCHMARK_TEMPLATE(BM_square_eigen, float, false)->Name("BM_square_eigen<float>")->Apply(squares);
#ifdef ATTN_BENCH_CBLAS
BENCHMARK_TEMPLATE(BM_square_cblas, false)->Name("BM_square_cblas<float>")->Apply(squares);
#endif
BENCHMARK_TEMPLATE(BM_square_attn_contract_bt, float)->Apply(squares);
BENCHMARK_TEMPLATE(BM_square_eigen, float, true)->Name("BM_square_eigen_bt<float>")->Apply(squares);
#ifdef ATTN_BENCH_CBLAS
BENCHMARK_TEMPLATE(BM_square_cblas, true)->Name("BM_square_cblas_bt<float>")->Apply(squares);
#endif

void scores(benchmark::internal::Benchmark* b) {
  attn_bench::timing(b)->Unit(benchmark::kMicrosecond);
}

BENCHMARK_TEMPLATE(BM_scores_attn, float)->Apply(scores);
BENCHMARK_TEMPLATE(BM_scores_eigen_loop, float, false)->Name("BM_scores_eigen_loop<float>")->Apply(scores);
BENCHMARK_TEMPLATE(BM_scores_eigen_loop, float, true)->Name("BM_scores_eigen_loop_omp<float>")->Apply(scores);

}  // namespace

BENCHMARK_MAIN();
