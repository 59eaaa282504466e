// Reports the CUDA devices this machine has; exits 77 (SKIP) when it has none.
// It is the first GPU test, and the pattern for the others: no device, no test.
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("no CUDA device: skipping (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      std::printf("device %d: cudaGetDeviceProperties failed\n", i);
      return 1;
    }
    std::printf("device %d: %s, compute capability %d.%d, %.1f GiB\n", i, prop.name,
                prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  }
  return 0;
}
