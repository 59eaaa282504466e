// fast_exp2 (cuda/attn/cuda/fast_exp2.cuh: ex2.approx.ftz.f32, the tensor-core fused attention's
// weights) on the GPU against exact powers of two (fast_exp2_cases.hpp): 2.26 million
// inputs across float's range and its edges. The emulator's twin passes the same checks
// (tests/unit/cuda/emulator_test.cpp).
#include "gpu_test.cuh"

#include <attn/cuda/fast_exp2.cuh>

#include <string>
#include <vector>

#include "fast_exp2_cases.hpp"

namespace {

using namespace gpu_test;

__global__ void powers(const float* x, float* out, int n) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i < n) out[i] = attn::cuda_backend::fast_exp2(x[i]);
}

void check_powers() {
  const std::vector<float> x = fast_exp2_cases::inputs();
  const int n = int(x.size());
  float *x_device = nullptr, *out_device = nullptr;
  cuda_ok(cudaMalloc(&x_device, x.size() * sizeof(float)), "cudaMalloc");
  cuda_ok(cudaMalloc(&out_device, x.size() * sizeof(float)), "cudaMalloc");
  cuda_ok(cudaMemcpy(x_device, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  powers<<<(n + 255) / 256, 256>>>(x_device, out_device, n);
  cuda_ok(cudaGetLastError(), "powers");
  std::vector<float> out(x.size());
  cuda_ok(cudaMemcpy(out.data(), out_device, x.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  int wrong = 0;
  std::string first;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::string mistake = fast_exp2_cases::mistake(x[i], out[i]);
    if (!mistake.empty() && wrong++ == 0) first = mistake;
  }
  expect(wrong == 0, "fast_exp2, " + std::to_string(n) + " inputs", std::to_string(wrong) + " wrong, first: " + first);
  cudaFree(x_device);
  cudaFree(out_device);
}

}  // namespace

int main() {
  if (const int status = skip_without_device(); status != 0) return status;
  guard_exceptions("fast_exp2", [] { check_powers(); });
  return finish();
}
