// Fused elementwise expressions: attn (one assignment, one pass) against the same arithmetic
// in Eigen one materialised temporary a step, and fused by hand in one Eigen Array expression.
//
// Two workloads, each over 1, 4 and 16 M floats:
//   chain    y = relu(a * b + c) * 0.5 + exp(-a)                  a, b, c, y: [n]
//   rowscale y = exp(x - m[row]) * s[row]  (softmax's last step)  x, y: [row, col]; m, s: [row]
//   softmax  y = exp(x - max_col x) / sum_col exp(x - max_col x)  x, y: [row, col]
//            in one attn assignment, in two (the max named) and in three (the exponentials too)
// Every variant uses all OpenMP threads (the Eigen baselines split their outputs the way
// attn's executor does), so the comparisons are about passes over memory, not threads.
// Times are wall-clock with several threads, the thread's CPU time with one (bench_common.hpp).
// bytes/s counts the bytes the computation must move once (inputs read, output written),
// the same for every variant: it is the useful bandwidth, not what the hardware moved.

#include <cstddef>
#include <string>

#include <Eigen/Core>
#include <benchmark/benchmark.h>

#include <attn/attn.hpp>

#include "bench_common.hpp"

namespace {

using attn_bench::split;
using index = std::ptrdiff_t;

// Legend: n the elements of a 1-D operand; row, col a row-major matrix of softmax rows.
using n_dim = attn::dim<"n">;
using row = attn::dim<"row">;
using col = attn::dim<"col">;

constexpr index cols = 1024;  // one softmax row: 4 KiB of floats, as a 1024-token score row
constexpr index grain = 64;   // pieces of the 1-D split start at multiples of 64 elements

template <class T>
using array = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using array_map = Eigen::Map<array<T>>;
template <class T>
using matrix_array = Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using matrix_map = Eigen::Map<matrix_array<T>>;

template <class T>
void clobber(T* data) {
  benchmark::DoNotOptimize(data);
  benchmark::ClobberMemory();
}

void check(benchmark::State& state, double error) {
  state.counters["max_rel_err"] = error;
  if (!(error < 1e-5)) state.SkipWithError(("result differs from the reference by " +
                                            std::to_string(error)).c_str());
}

// ---------------------------------------------------------------------------------------
// chain: y = relu(a * b + c) * 0.5 + exp(-a). Reads 3 arrays, writes 1: 16 bytes an element.

template <class T>
struct chain_inputs {
  index n;
  array<T> a, b, c, y;
  explicit chain_inputs(index size) : n(size), a(size), b(size), c(size), y(size) {
    attn_bench::fill(a.data(), n, 1);
    attn_bench::fill(b.data(), n, 2);
    attn_bench::fill(c.data(), n, 3);
    y.setZero();
  }
};

/// The best case: the whole chain as one Eigen Array expression, one pass per thread's piece.
template <class T>
void chain_fused(const array<T>& a, const array<T>& b, const array<T>& c, array<T>& y) {
  split(a.size(), grain, [&](index i, index len) {
    y.segment(i, len) = (a.segment(i, len) * b.segment(i, len) + c.segment(i, len))
                            .cwiseMax(T(0)) * T(0.5) +
                        (-a.segment(i, len)).exp();
  });
}

/// One step: dst = f(pieces), split over threads like every other pass.
template <class T, class F>
void step(array<T>& dst, F&& f) {
  split(dst.size(), grain, [&](index i, index len) { dst.segment(i, len) = f(i, len); });
}

/// The chain one operation at a time, each result written to memory before the next
/// operation reads it, as a library without fusion does. `t` holds six temporaries.
template <class T>
void chain_unfused(const array<T>& a, const array<T>& b, const array<T>& c, array<T>& y,
                   array<T> (&t)[6]) {
  step(t[0], [&](index i, index len) { return a.segment(i, len) * b.segment(i, len); });
  step(t[1], [&](index i, index len) { return t[0].segment(i, len) + c.segment(i, len); });
  step(t[2], [&](index i, index len) { return t[1].segment(i, len).cwiseMax(T(0)); });
  step(t[3], [&](index i, index len) { return t[2].segment(i, len) * T(0.5); });
  step(t[4], [&](index i, index len) { return -a.segment(i, len); });
  step(t[5], [&](index i, index len) { return t[4].segment(i, len).exp(); });
  step(y, [&](index i, index len) { return t[3].segment(i, len) + t[5].segment(i, len); });
}

template <class T>
void BM_chain_attn(benchmark::State& state) {
  const index n = state.range(0);
  attn::tensor<T, attn::shape<n_dim>> a(n), b(n), c(n), y(n);
  attn_bench::fill(a.data(), n, 1);
  attn_bench::fill(b.data(), n, 2);
  attn_bench::fill(c.data(), n, 3);
  {
    chain_inputs<T> ref(n);
    chain_fused(ref.a, ref.b, ref.c, ref.y);
    y = attn::relu(a * b + c) * T(0.5) + attn::exp(-a);
    check(state, attn_bench::max_error(y.data(), ref.y.data(), n));
  }
  for (auto _ : state) {
    y = attn::relu(a * b + c) * T(0.5) + attn::exp(-a);
    clobber(y.data());
  }
  attn_bench::set_rates(state, 4.0 * sizeof(T) * static_cast<double>(n), static_cast<double>(n));
}

template <class T>
void BM_chain_eigen_fused(benchmark::State& state) {
  chain_inputs<T> in(state.range(0));
  for (auto _ : state) {
    chain_fused(in.a, in.b, in.c, in.y);
    clobber(in.y.data());
  }
  attn_bench::set_rates(state, 4.0 * sizeof(T) * static_cast<double>(in.n),
                        static_cast<double>(in.n));
}

template <class T>
void BM_chain_eigen_unfused(benchmark::State& state) {
  chain_inputs<T> in(state.range(0));
  array<T> t[6];
  for (auto& x : t) x.setZero(in.n);  // allocated and touched once, reused every iteration
  {
    array<T> ref(in.n);
    chain_fused(in.a, in.b, in.c, ref);
    chain_unfused(in.a, in.b, in.c, in.y, t);
    check(state, attn_bench::max_error(in.y.data(), ref.data(), in.n));
  }
  for (auto _ : state) {
    chain_unfused(in.a, in.b, in.c, in.y, t);
    clobber(in.y.data());
  }
  attn_bench::set_rates(state, 4.0 * sizeof(T) * static_cast<double>(in.n),
                        static_cast<double>(in.n));
}

/// As BM_chain_eigen_unfused, but each step allocates its result, as a naive library does.
template <class T>
void BM_chain_eigen_unfused_alloc(benchmark::State& state) {
  chain_inputs<T> in(state.range(0));
  for (auto _ : state) {
    array<T> t[6];
    for (auto& x : t) x.resize(in.n);
    chain_unfused(in.a, in.b, in.c, in.y, t);
    clobber(in.y.data());
  }
  attn_bench::set_rates(state, 4.0 * sizeof(T) * static_cast<double>(in.n),
                        static_cast<double>(in.n));
}

// ---------------------------------------------------------------------------------------
// rowscale: y = exp(x - m[row]) * s[row], both vectors broadcast along col. 8 bytes an element.

template <class T>
struct row_inputs {
  index rows;
  matrix_array<T> x, y;
  array<T> m, s;
  explicit row_inputs(index r) : rows(r), x(r, cols), y(r, cols), m(r), s(r) {
    attn_bench::fill(x.data(), x.size(), 4, T(-4), T(4));
    attn_bench::fill(m.data(), r, 5, T(3), T(4));
    attn_bench::fill(s.data(), r, 6, T(0.5), T(1));
    y.setZero();
  }
};

template <class T>
void rowscale_fused(const matrix_array<T>& x, const array<T>& m, const array<T>& s,
                    matrix_array<T>& y) {
  split(x.rows(), 1, [&](index r0, index count) {
    for (index r = r0; r < r0 + count; ++r) y.row(r) = (x.row(r) - m[r]).exp() * s[r];
  });
}

/// One step of a matrix computation, split over rows.
template <class T, class F>
void row_step(matrix_array<T>& dst, F&& f) {
  split(dst.rows(), 1, [&](index r, index count) { dst.middleRows(r, count) = f(r, count); });
}

/// Each operation materialised, broadcasts included (a library that materialises every
/// result materialises a broadcast's too). `t` holds four [row, col] temporaries.
template <class T>
void rowscale_unfused(const matrix_array<T>& x, const array<T>& m, const array<T>& s,
                      matrix_array<T>& y, matrix_array<T> (&t)[4]) {
  const index c = x.cols();
  row_step(t[0], [&](index r, index k) { return m.segment(r, k).replicate(1, c); });
  row_step(t[1], [&](index r, index k) { return x.middleRows(r, k) - t[0].middleRows(r, k); });
  row_step(t[2], [&](index r, index k) { return t[1].middleRows(r, k).exp(); });
  row_step(t[3], [&](index r, index k) { return s.segment(r, k).replicate(1, c); });
  row_step(y, [&](index r, index k) { return t[2].middleRows(r, k) * t[3].middleRows(r, k); });
}

template <class T>
void BM_rowscale_attn(benchmark::State& state) {
  const index rows = state.range(0);
  attn::tensor<T, attn::shape<row, col>> x(rows, cols), y(rows, cols);
  attn::tensor<T, attn::shape<row>> m(rows), s(rows);
  attn_bench::fill(x.data(), x.size(), 4, T(-4), T(4));
  attn_bench::fill(m.data(), rows, 5, T(3), T(4));
  attn_bench::fill(s.data(), rows, 6, T(0.5), T(1));
  {
    row_inputs<T> ref(rows);
    rowscale_fused(ref.x, ref.m, ref.s, ref.y);
    y = attn::exp(x - attn::broadcast_like(m, x)) * attn::broadcast_like(s, x);
    check(state, attn_bench::max_error(y.data(), ref.y.data(), y.size()));
  }
  for (auto _ : state) {
    y = attn::exp(x - attn::broadcast_like(m, x)) * attn::broadcast_like(s, x);
    clobber(y.data());
  }
  attn_bench::set_rates(state, 2.0 * sizeof(T) * static_cast<double>(x.size()),
                        static_cast<double>(x.size()));
}

template <class T>
void BM_rowscale_eigen_fused(benchmark::State& state) {
  row_inputs<T> in(state.range(0));
  for (auto _ : state) {
    rowscale_fused(in.x, in.m, in.s, in.y);
    clobber(in.y.data());
  }
  attn_bench::set_rates(state, 2.0 * sizeof(T) * static_cast<double>(in.x.size()),
                        static_cast<double>(in.x.size()));
}

template <class T>
void BM_rowscale_eigen_unfused(benchmark::State& state) {
  row_inputs<T> in(state.range(0));
  matrix_array<T> t[4];
  for (auto& x : t) x.setZero(in.rows, cols);
  {
    matrix_array<T> ref(in.rows, cols);
    rowscale_fused(in.x, in.m, in.s, ref);
    rowscale_unfused(in.x, in.m, in.s, in.y, t);
    check(state, attn_bench::max_error(in.y.data(), ref.data(), ref.size()));
  }
  for (auto _ : state) {
    rowscale_unfused(in.x, in.m, in.s, in.y, t);
    clobber(in.y.data());
  }
  attn_bench::set_rates(state, 2.0 * sizeof(T) * static_cast<double>(in.x.size()),
                        static_cast<double>(in.x.size()));
}

// ---------------------------------------------------------------------------------------
// softmax over col, with the reductions. 8 bytes an element (x read, y written).

/// The best case: a row at a time, its max, exponentials and sum while it is in cache.
template <class T>
void softmax_fused(const matrix_array<T>& x, matrix_array<T>& y) {
  split(x.rows(), 1, [&](index r0, index count) {
    for (index r = r0; r < r0 + count; ++r) {
      y.row(r) = (x.row(r) - x.row(r).maxCoeff()).exp();
      y.row(r) /= y.row(r).sum();
    }
  });
}

/// Each operation materialised: max, broadcast, subtract, exp, sum, broadcast, divide.
template <class T>
void softmax_unfused(const matrix_array<T>& x, matrix_array<T>& y, array<T> (&v)[2],
                     matrix_array<T> (&t)[4]) {
  const index c = x.cols();
  split(x.rows(), 1, [&](index r, index k) { v[0].segment(r, k) = x.middleRows(r, k).rowwise().maxCoeff(); });
  row_step(t[0], [&](index r, index k) { return v[0].segment(r, k).replicate(1, c); });
  row_step(t[1], [&](index r, index k) { return x.middleRows(r, k) - t[0].middleRows(r, k); });
  row_step(t[2], [&](index r, index k) { return t[1].middleRows(r, k).exp(); });
  split(x.rows(), 1, [&](index r, index k) { v[1].segment(r, k) = t[2].middleRows(r, k).rowwise().sum(); });
  row_step(t[3], [&](index r, index k) { return v[1].segment(r, k).replicate(1, c); });
  row_step(y, [&](index r, index k) { return t[2].middleRows(r, k) / t[3].middleRows(r, k); });
}

template <class T>
struct softmax_attn_inputs {
  attn::tensor<T, attn::shape<row, col>> x, y, e;
  attn::tensor<T, attn::shape<row>> m;
  explicit softmax_attn_inputs(index rows) : x(rows, cols), y(rows, cols), e(rows, cols), m(rows) {
    attn_bench::fill(x.data(), x.size(), 4, T(-4), T(4));
  }
};

/// softmax in one attn assignment, as model code writes it.
template <class X, class Y>
void softmax_attn_one(const X& x, Y& y) {
  const auto shifted = x - attn::broadcast_like(attn::max<col>(x), x);
  y = attn::exp(shifted) / attn::broadcast_like(attn::sum<col>(attn::exp(shifted)), x);
}

/// softmax in two: the row max named first, so that it is computed once.
template <class X, class Y, class M>
void softmax_attn_two(const X& x, Y& y, M& m) {
  m = attn::max<col>(x);
  const auto shifted = x - attn::broadcast_like(m, x);
  y = attn::exp(shifted) / attn::broadcast_like(attn::sum<col>(attn::exp(shifted)), x);
}

/// softmax in three: the exponentials named too, so that they are computed once.
template <class X, class Y, class M>
void softmax_attn_three(const X& x, Y& y, M& m, Y& e) {
  m = attn::max<col>(x);
  e = attn::exp(x - attn::broadcast_like(m, x));
  y = e / attn::broadcast_like(attn::sum<col>(e), x);
}

template <class T, int Statements>
void BM_softmax_attn(benchmark::State& state) {
  softmax_attn_inputs<T> in(state.range(0));
  auto run = [&] {
    if constexpr (Statements == 1) softmax_attn_one(in.x, in.y);
    else if constexpr (Statements == 2) softmax_attn_two(in.x, in.y, in.m);
    else softmax_attn_three(in.x, in.y, in.m, in.e);
  };
  {
    row_inputs<T> ref(state.range(0));
    softmax_fused(ref.x, ref.y);
    run();
    check(state, attn_bench::max_error(in.y.data(), ref.y.data(), in.y.size()));
  }
  for (auto _ : state) {
    run();
    clobber(in.y.data());
  }
  attn_bench::set_rates(state, 2.0 * sizeof(T) * static_cast<double>(in.x.size()),
                        static_cast<double>(in.x.size()));
}

template <class T>
void BM_softmax_eigen_fused(benchmark::State& state) {
  row_inputs<T> in(state.range(0));
  for (auto _ : state) {
    softmax_fused(in.x, in.y);
    clobber(in.y.data());
  }
  attn_bench::set_rates(state, 2.0 * sizeof(T) * static_cast<double>(in.x.size()),
                        static_cast<double>(in.x.size()));
}

template <class T>
void BM_softmax_eigen_unfused(benchmark::State& state) {
  row_inputs<T> in(state.range(0));
  array<T> v[2];
  for (auto& x : v) x.setZero(in.rows);
  matrix_array<T> t[4];
  for (auto& x : t) x.setZero(in.rows, cols);
  {
    matrix_array<T> ref(in.rows, cols);
    softmax_fused(in.x, ref);
    softmax_unfused(in.x, in.y, v, t);
    check(state, attn_bench::max_error(in.y.data(), ref.data(), ref.size()));
  }
  for (auto _ : state) {
    softmax_unfused(in.x, in.y, v, t);
    clobber(in.y.data());
  }
  attn_bench::set_rates(state, 2.0 * sizeof(T) * static_cast<double>(in.x.size()),
                        static_cast<double>(in.x.size()));
}

// 1, 4 and 16 M elements: within L3 (32 MiB here) at the small end, DRAM-bound at the top.
void elements(benchmark::internal::Benchmark* b) {
  for (index n : {index{1} << 20, index{1} << 22, index{1} << 24}) b->Arg(n);
  attn_bench::timing(b)->Unit(benchmark::kMillisecond);
}
void rows(benchmark::internal::Benchmark* b) {
  for (index n : {index{1} << 20, index{1} << 22, index{1} << 24}) b->Arg(n / cols);
  attn_bench::timing(b->ArgName("rows"))->Unit(benchmark::kMillisecond);
}

BENCHMARK_TEMPLATE(BM_chain_attn, float)->Apply(elements);
BENCHMARK_TEMPLATE(BM_chain_eigen_fused, float)->Apply(elements);
BENCHMARK_TEMPLATE(BM_chain_eigen_unfused, float)->Apply(elements);
BENCHMARK_TEMPLATE(BM_chain_eigen_unfused_alloc, float)->Apply(elements);

BENCHMARK_TEMPLATE(BM_rowscale_attn, float)->Apply(rows);
BENCHMARK_TEMPLATE(BM_rowscale_eigen_fused, float)->Apply(rows);
BENCHMARK_TEMPLATE(BM_rowscale_eigen_unfused, float)->Apply(rows);

BENCHMARK_TEMPLATE(BM_softmax_attn, float, 1)->Name("BM_softmax_attn<float>")->Apply(rows);
BENCHMARK_TEMPLATE(BM_softmax_attn, float, 2)->Name("BM_softmax_attn_two<float>")->Apply(rows);
BENCHMARK_TEMPLATE(BM_softmax_attn, float, 3)->Name("BM_softmax_attn_three<float>")->Apply(rows);
BENCHMARK_TEMPLATE(BM_softmax_eigen_fused, float)->Apply(rows);
BENCHMARK_TEMPLATE(BM_softmax_eigen_unfused, float)->Apply(rows);

}  // namespace

BENCHMARK_MAIN();
