// How the CUDA backend's launchers reach the GPU (a Runtime, fused_attention_launch.cuh):
// kernel launches on attn's stream with their errors checked, stream-ordered scratch, and the
// opt-in to more than 48 KiB of dynamic shared memory. The CPU emulator (emulator.hpp) has the
// same members.
#pragma once

#include <cstddef>
#include <utility>

#include "memory.cuh"

namespace attn::cuda_backend {

struct device_runtime {
  template <class... Params, class... Args>
  static void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, Args&&... args) {
    kernel<<<grid, block, shared_bytes, stream()>>>(std::forward<Args>(args)...);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  static scratch_ptr scratch(std::size_t bytes) { return allocate_scratch(bytes); }

  static void zero(void* p, std::size_t bytes) { ATTN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream())); }

  template <class... Params>
  static void allow_shared_memory(void (*kernel)(Params...), int bytes) {
    ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
};

}  // namespace attn::cuda_backend
