// How the CUDA backend's launchers reach the GPU (a Runtime, fused_attention_launch.cuh):
// kernel launches on attn's stream with their errors checked, stream-ordered scratch, and the
// opt-in to more than 48 KiB of dynamic shared memory. The CPU emulator (emulator.hpp) has the
// same members.
#pragma once

#include <cstddef>
#include <mutex>
#include <set>
#include <tuple>
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

  /// Once a kernel, device and size: the launchers ask before every launch, and the attribute
  /// is a driver call that need not be repeated.
  template <class... Params>
  static void allow_shared_memory(void (*kernel)(Params...), int bytes) {
    int device = 0;
    ATTN_CUDA_CHECK(cudaGetDevice(&device));
    const std::tuple<const void*, int, int> key{reinterpret_cast<const void*>(kernel), device, bytes};
    static std::mutex guard;
    static std::set<std::tuple<const void*, int, int>> allowed;
    const std::lock_guard<std::mutex> lock(guard);
    if (allowed.contains(key)) return;
    ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    allowed.insert(key);
  }
};

}  // namespace attn::cuda_backend
