// How the CUDA backend's launchers reach the GPU (a Runtime, fused_attention_launch.cuh):
// kernel launches on attn's stream with their errors checked, stream-ordered scratch, the
// opt-in to more than 48 KiB of dynamic shared memory, up to the device's limit, and the scratch
// fused attention's learned inputs' gradients may take. The CPU emulator (emulator.hpp) has the
// same members.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
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

  /// The scratch that fused attention's backward gives its learned inputs' gradients on the way
  /// (fused_attention_launch.cuh): a launch of its dQ kernel takes as many sentences as fit.
  /// The emulator's runtime starts from the same (emulator.hpp, most_row_gradient_bytes).
  static std::size_t row_gradient_limit() { return std::size_t{256} << 20; }

  /// The launchers ask before every launch; the attribute (one value a kernel and device, the
  /// last set) is a driver call, made only when a size is larger than any granted before.
  template <class... Params>
  static void allow_shared_memory(void (*kernel)(Params...), int bytes) {
    int device = 0;
    ATTN_CUDA_CHECK(cudaGetDevice(&device));
    const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel), device};
    static std::mutex guard;
    static std::map<std::pair<const void*, int>, int> granted;
    const std::lock_guard<std::mutex> lock(guard);
    const auto known = granted.find(key);
    if (known != granted.end() && known->second >= bytes) return;
    ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    granted[key] = bytes;
  }

  /// The most dynamic shared memory a block of the current device may ask for: 227 KiB on
  /// compute capability 9.0, 163 on 8.0, 99 on 8.6, 8.9 and 12.x (the CUDA C++ Programming
  /// Guide's table of technical specifications).
  static std::size_t shared_memory_limit() {
    int device = 0, bytes = 0;
    ATTN_CUDA_CHECK(cudaGetDevice(&device));
    ATTN_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return static_cast<std::size_t>(bytes);
  }
};

}  // namespace attn::cuda_backend
