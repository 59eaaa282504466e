// What the bench/ programs on the GPU share: their arguments' comma lists, a check for a device,
// random inputs on the device, and timing with CUDA events around work queued on attn's stream.
#pragma once

#include <attn/cuda/cuda.cuh>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace attn_bench {

/// "a,b,c" as {"a", "b", "c"}.
inline std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  return parts;
}

/// Whether a CUDA device is there; if not, says so for `program` (which then exits 77: a skip).
inline bool have_device(const char* program) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) return true;
  std::fprintf(stderr, "%s: no CUDA device\n", program);
  return false;
}

/// n normal random numbers (mean 0, deviation 1) as T.
template <class T>
std::vector<T> random_host(std::size_t n, unsigned seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> values(n);
  for (auto& v : values) v = T(normal(generator));
  return values;
}

/// Host values copied to fresh device memory (the caller frees it with memory<cuda>::deallocate).
template <class T>
T* upload(const std::vector<T>& host) {
  T* device = static_cast<T*>(attn::memory<attn::cuda>::allocate(host.size() * sizeof(T)));
  attn::memory<attn::cuda>::copy_from_host(device, host.data(), host.size() * sizeof(T));
  return device;
}

/// A tensor of shape S, whose two free extents are a and b, of normal random numbers on the device.
template <class T, class S>
attn::tensor<T, S, attn::cuda> random_device(attn::index_t a, attn::index_t b, unsigned seed) {
  attn::tensor<T, S> host(a, b);
  const auto values = random_host<T>(static_cast<std::size_t>(host.size()), seed);
  std::copy(values.begin(), values.end(), host.data());
  return attn::to_device<attn::cuda>(host);
}

/// Keeps the GPU busy for `seconds` (writing 1 GiB over and over) before a program's first
/// timing. An idle GPU runs at its lowest clock (345 MHz on the H100 of 2026-11-28), and kernels
/// of microseconds timed one at a time between host waits may not raise it. The suspected cause
/// of primitives_gpu's second case (bf16 column sums at 8000 x 512) taking 108 µs where three
/// times its rows took 18 (benchmarks.md, "GPU: the fourth run"); not yet confirmed on a GPU.
inline void spin_up_clocks(double seconds = 0.5) {
  constexpr std::size_t bytes = std::size_t{1} << 30;
  void* buffer = nullptr;
  ATTN_CUDA_CHECK(cudaMalloc(&buffer, bytes));
  const auto start = std::chrono::steady_clock::now();
  for (int pass = 0; std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds; ++pass) {
    for (int i = 0; i < 16; ++i) ATTN_CUDA_CHECK(cudaMemsetAsync(buffer, pass & 0xff, bytes));
    ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  ATTN_CUDA_CHECK(cudaFree(buffer));
}

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
