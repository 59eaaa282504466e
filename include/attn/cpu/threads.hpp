// One threading runtime for the CPU backend: OpenMP, shared with Eigen's GEMM and OpenBLAS.
#pragma once

#include <algorithm>

#include "../core/config.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace attn::cpu_backend {

/// Threads a parallel region will use.
inline int max_threads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

/// Calls body(begin, end) on consecutive pieces of [0, count) whose starts are multiples of
/// `grain`, one piece a thread; runs inline when the work is too small to share.
template <class Body>
void parallel_for(index_t count, index_t grain, index_t min_per_thread, Body&& body) {
  const index_t threads =
      std::min<index_t>(max_threads(), std::max<index_t>(1, count / std::max<index_t>(1, min_per_thread)));
  if (threads <= 1) {
    body(index_t{0}, count);
    return;
  }
  const index_t per_thread = (count + threads - 1) / threads;
  const index_t piece = (per_thread + grain - 1) / grain * grain;
#ifdef _OPENMP
#pragma omp parallel for num_threads(static_cast<int>(threads)) schedule(static)
#endif
  for (index_t t = 0; t < threads; ++t) {
    const index_t begin = std::min(count, t * piece);
    const index_t end = std::min(count, begin + piece);
    if (begin < end) body(begin, end);
  }
}

}  // namespace attn::cpu_backend
