// Shared helpers of the CPU benchmarks: cheap deterministic inputs, the OpenMP split the
// hand-written Eigen baselines use, and the rate counters every benchmark reports.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include <benchmark/benchmark.h>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace attn_bench {

/// Threads an OpenMP region gets here (1 without OpenMP): printed in the context.
inline int threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// Google Benchmark's main after the cases are registered, with the threads in the context.
inline int run_registered(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("threads", std::to_string(threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

/// Fills [data, data + n) with values in [lo, hi) from a hash of the index and a seed:
/// deterministic, and fast enough to run before every measurement of 16 M elements.
template <class T>
void fill(T* data, std::ptrdiff_t n, std::uint32_t seed, T lo = T(-1), T hi = T(1)) {
  const T scale = (hi - lo) / T(1 << 24);
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed * 2246822519u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    data[i] = lo + scale * static_cast<T>(h >> 8);
  }
}

/// Largest |a - b| / (1 + |b|) over n elements: how the benchmarks check that every
/// variant computes the same thing before timing it.
template <class T>
double max_error(const T* a, const T* b, std::ptrdiff_t n) {
  double worst = 0;
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])) /
                     (1.0 + std::abs(static_cast<double>(b[i])));
    if (!(d <= worst)) worst = d;  // NaN counts as the worst
  }
  return worst;
}

/// Calls body(begin, count) on one contiguous piece of [0, n) per OpenMP thread, pieces
/// starting at multiples of `grain`: how the Eigen baselines use every core, as attn does.
template <class Body>
void split(std::ptrdiff_t n, std::ptrdiff_t grain, Body&& body) {
#ifdef _OPENMP
#pragma omp parallel
  {
    const std::ptrdiff_t count = omp_get_num_threads();
    const std::ptrdiff_t t = omp_get_thread_num();
#else
  {
    const std::ptrdiff_t count = 1;
    const std::ptrdiff_t t = 0;
#endif
    std::ptrdiff_t piece = (n + count - 1) / count;
    piece = (piece + grain - 1) / grain * grain;
    const std::ptrdiff_t begin = std::min(n, t * piece);
    const std::ptrdiff_t end = std::min(n, begin + piece);
    if (begin < end) body(begin, end - begin);
  }
}

/// Which clock a benchmark reads. With several OpenMP threads, wall-clock time (the
/// main thread's CPU time would miss the others' work). With one, the thread's CPU time:
/// the same on an idle machine, and unaffected by other processes that share the cores.
inline benchmark::internal::Benchmark* timing(benchmark::internal::Benchmark* b) {
  return threads() > 1 ? b->UseRealTime() : b;
}

/// bytes/s, items/s (elements) and the thread count, per iteration of `state`.
inline void set_rates(benchmark::State& state, double bytes, double items) {
  state.counters["bytes/s"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["items/s"] =
      benchmark::Counter(items, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads();
}

/// FLOP/s for `flops` floating-point operations per iteration.
inline void set_flops(benchmark::State& state, double flops) {
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads();
}

}  // namespace attn_bench
