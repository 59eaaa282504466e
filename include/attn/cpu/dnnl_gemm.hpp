// Float matrix products through oneDNN's sgemm when attn is built with it (the `dnnl` option,
// -DATTN_USE_DNNL): oneDNN generates its kernels for the CPU it runs on (AVX-512 where there is
// AVX-512), whatever kernels OpenBLAS picks or is told to pick (OPENBLAS_CORETYPE), and splits
// small products over threads better. CTranslate2 multiplies through the same library.
// docs/benchmarks.md has both side by side.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "../core/config.hpp"

#if defined(ATTN_USE_DNNL)
#include <dnnl.h>
#endif

namespace attn::cpu_backend {

/// Whether float products go through oneDNN (built with it, and not turned off at run time by
/// ATTN_DNNL=0 in the environment, which benchmarks use to compare with OpenBLAS).
inline bool dnnl_gemm_enabled() {
#if defined(ATTN_USE_DNNL)
  static const bool enabled = [] {
    const char* setting = std::getenv("ATTN_DNNL");
    return setting == nullptr || std::string(setting) != "0";
  }();
  return enabled;
#else
  return false;
#endif
}

/// c [m, n] = alpha · op(a) · op(b) + beta · c, row-major: a is [m, k] (transposed_a: stored
/// [k, m]) and b [k, n] (transposed_b: stored [n, k]), each stored whole (its rows adjacent).
/// Only when dnnl_gemm_enabled().
inline void dnnl_gemm([[maybe_unused]] float* c, [[maybe_unused]] const float* a, [[maybe_unused]] bool transposed_a,
                      [[maybe_unused]] const float* b, [[maybe_unused]] bool transposed_b, [[maybe_unused]] index_t m,
                      [[maybe_unused]] index_t n, [[maybe_unused]] index_t k, [[maybe_unused]] float alpha = 1,
                      [[maybe_unused]] float beta = 0) {
#if defined(ATTN_USE_DNNL)
  const dnnl_status_t status =
      dnnl_sgemm(transposed_a ? 'T' : 'N', transposed_b ? 'T' : 'N', m, n, k, alpha, a, transposed_a ? m : k, b,
                 transposed_b ? k : n, beta, c, n);
  if (status != dnnl_success)
    throw std::runtime_error("attn: oneDNN's sgemm failed on a [" + std::to_string(m) + ", " + std::to_string(k) +
                             "] x [" + std::to_string(k) + ", " + std::to_string(n) + "] product (status " +
                             std::to_string(int(status)) + ")");
#else
  throw std::logic_error("attn: dnnl_gemm called in a build without oneDNN");
#endif
}

}  // namespace attn::cpu_backend
