// Timing on the GPU for the bench/ programs: CUDA events around work queued on attn's stream.
#pragma once

#include <attn/cuda/cuda.cuh>

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace attn_bench {

/// Median milliseconds of `run` over `repeat` timed runs after two warm-up runs.
inline double median_ms(int repeat, const std::function<void()>& run) {
  cudaStream_t stream = attn::cuda_backend::stream();
  for (int i = 0; i < 2; ++i) run();
  std::vector<float> times;
  cudaEvent_t start, stop;
  ATTN_CUDA_CHECK(cudaEventCreate(&start));
  ATTN_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < repeat; ++i) {
    ATTN_CUDA_CHECK(cudaEventRecord(start, stream));
    run();
    ATTN_CUDA_CHECK(cudaEventRecord(stop, stream));
    ATTN_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    ATTN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  ATTN_CUDA_CHECK(cudaEventDestroy(start));
  ATTN_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace attn_bench
