// Devices: plain tags, each with a memory policy and an executor that lowers expressions for it.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace attn {

/// Host memory; expressions lower to Eigen (include/attn/cpu).
struct cpu {};

/// An NVIDIA GPU; memory and lowering are defined in cuda/attn/cuda, built by nvcc.
struct cuda {};

template <class D>
concept device = std::same_as<D, cpu> || std::same_as<D, cuda>;

/// How a device allocates, frees and copies raw bytes. Specialised per device; using a
/// device whose backend header was not included fails as an incomplete type.
template <class Device>
struct memory;

template <>
struct memory<cpu> {
  /// Cache-line alignment: Eigen's widest packets and OpenBLAS both prefer it.
  static constexpr std::size_t alignment = 64;

  /// Zero-filled, aligned storage; never returns null (throws std::bad_alloc).
  static void* allocate(std::size_t bytes) {
    void* p = allocate_uninitialized(bytes);
    std::memset(p, 0, rounded(bytes));
    return p;
  }
  /// Aligned storage with unspecified contents, for results about to be written.
  static void* allocate_uninitialized(std::size_t bytes) {
    void* p = std::aligned_alloc(alignment, rounded(bytes));
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  static void deallocate(void* p) noexcept { std::free(p); }
  static std::size_t rounded(std::size_t bytes) {
    return bytes == 0 ? alignment : (bytes + alignment - 1) / alignment * alignment;
  }
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }
};

/// Lowers expressions to code for a device: `executor<Device>::assign(view, expression)`.
/// Specialised by the backends (cpu/assign.hpp, cuda/attn/cuda/assign.cuh).
template <class Device>
struct executor;

}  // namespace attn
