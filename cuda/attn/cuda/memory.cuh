// Device memory for the CUDA backend: attn::memory<cuda>, stream-ordered scratch, host <-> device copies, error checks.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <attn/core.hpp>

namespace attn::cuda_backend {

/// A failed CUDA runtime or cuBLAS call. Derives from std::runtime_error so that callers who
/// do not care where an error came from can catch that.
class cuda_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] inline void fail(std::string_view library, std::string_view what, std::string_view why,
                              const std::source_location& where) {
  throw cuda_error(std::string(where.file_name()) + ":" + std::to_string(where.line()) + ": " +
                   std::string(library) + ": " + std::string(what) + ": " + std::string(why));
}
}  // namespace detail

/// Throws cuda_error naming the call, the CUDA error and where the check was made.
inline void check(cudaError_t status, std::string_view what,
                  const std::source_location& where = std::source_location::current()) {
  if (status != cudaSuccess) {
    // Clears the error for the next call to see, unless it is sticky (the context is gone).
    (void)cudaGetLastError();
    detail::fail("CUDA", what, std::string(cudaGetErrorName(status)) + " (" +
                                   cudaGetErrorString(status) + ")",
                 where);
  }
}

/// Throws cuda_error naming the call, the cuBLAS status and where the check was made.
inline void check(cublasStatus_t status, std::string_view what,
                  const std::source_location& where = std::source_location::current()) {
  if (status != CUBLAS_STATUS_SUCCESS)
    detail::fail("cuBLAS", what, cublasGetStatusString(status), where);
}

}  // namespace attn::cuda_backend

/// Checks a CUDA runtime or cuBLAS call; the message names the call as written and its place.
#define ATTN_CUDA_CHECK(call) ::attn::cuda_backend::check((call), #call)

namespace attn::cuda_backend {

/// The stream that every kernel, copy and cuBLAS call of attn is ordered on. The default
/// stream, so that plain cudaMemcpy calls of a user's own code are ordered with ours too.
inline cudaStream_t stream() noexcept { return cudaStream_t{}; }

/// Waits for everything attn has enqueued, and reports errors of kernels that already ran.
inline void synchronize() { ATTN_CUDA_CHECK(cudaStreamSynchronize(stream())); }

/// Number of multiprocessors of the current device: launch sizes are multiples of it.
inline int multiprocessor_count() {
  thread_local std::vector<int> by_device;  // 0 until asked
  int device = 0;
  ATTN_CUDA_CHECK(cudaGetDevice(&device));
  if (static_cast<std::size_t>(device) >= by_device.size())
    by_device.resize(static_cast<std::size_t>(device) + 1, 0);
  int& count = by_device[static_cast<std::size_t>(device)];
  if (count == 0)
    ATTN_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

namespace detail {
/// Whether the current device has stream-ordered memory pools (every GPU of CUDA 12's
/// drivers does, unless the driver turned them off). Asked once per device, for every thread:
/// memory<cuda> frees what the pool gave with cudaFreeAsync and the rest with cudaFree.
inline bool pools_supported() {
  static std::atomic<int> answers[256] = {};  // per device: 0 not asked yet, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 256) return false;
  int answer = answers[device].load(std::memory_order_relaxed);
  if (answer == 0) {
    int supported = 0;
    answer = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess &&
                     supported != 0
                 ? 2
                 : 1;
    answers[device].store(answer, std::memory_order_relaxed);
  }
  return answer == 2;
}
}  // namespace detail

/// The current device's default memory pool, set (once) to keep the memory freed into it
/// rather than return it to the driver at each synchronisation: the caching allocator. Null
/// without pool support.
inline cudaMemPool_t device_pool() {
  if (!detail::pools_supported()) return nullptr;
  int device = 0;
  ATTN_CUDA_CHECK(cudaGetDevice(&device));
  cudaMemPool_t pool = nullptr;
  ATTN_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  thread_local std::vector<bool> configured;
  if (std::size_t(device) >= configured.size()) configured.resize(std::size_t(device) + 1, false);
  if (!configured[std::size_t(device)]) {
    std::uint64_t keep_all = ~std::uint64_t{0};
    ATTN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
    configured[std::size_t(device)] = true;
  }
  return pool;
}

/// What the pool holds: `reserved` bytes taken from the driver (growing only when a request
/// finds nothing free: the count the steady-state tests watch), `used` by live allocations, and
/// the peaks of both since the last reset_memory_peaks().
struct memory_statistics {
  std::uint64_t reserved = 0, reserved_peak = 0, used = 0, used_peak = 0;
};
inline memory_statistics memory_stats() {
  memory_statistics s;
  cudaMemPool_t pool = device_pool();
  if (pool == nullptr) return s;
  ATTN_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &s.reserved));
  ATTN_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &s.reserved_peak));
  ATTN_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &s.used));
  ATTN_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &s.used_peak));
  return s;
}
inline void reset_memory_peaks() {
  cudaMemPool_t pool = device_pool();
  if (pool == nullptr) return;
  std::uint64_t zero = 0;
  ATTN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
  ATTN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
}

namespace detail {
/// Frees scratch memory after the work enqueued before it, not before: stream-ordered when it
/// came from the pool, else after waiting for the stream (cudaFree alone only "may" wait).
struct scratch_deleter {
  bool pooled = true;
  void operator()(void* p) const noexcept {
    if (p == nullptr) return;
    if (pooled) {
      (void)cudaFreeAsync(p, stream());
    } else {
      (void)cudaStreamSynchronize(stream());
      (void)cudaFree(p);
    }
  }
};
}  // namespace detail

/// Device memory that lives for one evaluation (a temporary operand, a reduction's result).
using scratch_ptr = std::unique_ptr<void, detail::scratch_deleter>;

/// Uninitialised device memory from the stream-ordered pool (cudaMallocAsync): allocating and
/// freeing temporaries between kernels then costs no device synchronisation, and reuses what
/// was freed (device_pool). Falls back to cudaMalloc on devices without memory pools.
inline scratch_ptr allocate_scratch(std::size_t bytes) {
  if (bytes == 0) return scratch_ptr(nullptr, {});
  void* p = nullptr;
  if (device_pool() != nullptr) {
    check(cudaMallocAsync(&p, bytes, stream()), "cudaMallocAsync(" + std::to_string(bytes) + " bytes)");
    return scratch_ptr(p, {true});
  }
  check(cudaMalloc(&p, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  return scratch_ptr(p, {false});
}

/// The temporaries of one evaluation; they are freed, in stream order, when it is destroyed.
class workspace {
 public:
  /// A view of fresh, uninitialised device memory with the given extents.
  template <class T, class S>
  tensor_view<T, S, cuda> make(const attn::extents<S>& sizes) {
    buffers_.push_back(allocate_scratch(static_cast<std::size_t>(sizes.size()) * sizeof(T)));
    return {static_cast<T*>(buffers_.back().get()), sizes};
  }

 private:
  std::vector<scratch_ptr> buffers_;
};

}  // namespace attn::cuda_backend

namespace attn {

/// Memory on the current CUDA device, for attn::tensor<T, S, cuda>: stream-ordered
/// (cudaMallocAsync, cudaFreeAsync on attn's stream) from the device's default memory pool,
/// which keeps what is freed for the next allocation (cuda_backend::device_pool), so that a
/// training step that allocates what the last one freed asks the driver for nothing.
template <>
struct memory<cuda> {
  /// What cudaMalloc guarantees; more than any vector load needs.
  static constexpr std::size_t alignment = 256;

  /// Zero-filled device memory, as memory<cpu> gives zero-filled host memory. Never returns
  /// null for a non-zero size; throws cuda_error (a std::runtime_error) when out of memory.
  static void* allocate(std::size_t bytes) {
    void* p = allocate_uninitialized(bytes);
    if (p != nullptr) {
      const cudaError_t status = cudaMemsetAsync(p, 0, bytes, cuda_backend::stream());
      if (status != cudaSuccess) {
        deallocate(p);
        cuda_backend::check(status, "cudaMemsetAsync");
      }
    }
    return p;
  }
  static void* allocate_uninitialized(std::size_t bytes) {
    return cuda_backend::allocate_scratch(bytes).release();
  }
  /// Stream-ordered: the memory is reused only by work enqueued after the work that reads it.
  /// Errors are dropped: a destructor cannot report them, and at exit the runtime may already
  /// be unloading.
  static void deallocate(void* p) noexcept {
    if (p == nullptr) return;
    if (cuda_backend::detail::pools_supported()) {
      (void)cudaFreeAsync(p, cuda_backend::stream());
    } else {
      (void)cudaStreamSynchronize(cuda_backend::stream());
      (void)cudaFree(p);
    }
  }
  /// Device to device, ordered after the kernels already enqueued.
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0 || dst == src) return;
    ATTN_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_backend::stream()));
  }
  /// Host to device; returns when the host memory may be reused.
  static void copy_from_host(void* dst, const void* host, std::size_t bytes) {
    if (bytes == 0) return;
    ATTN_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, cuda_backend::stream()));
    cuda_backend::synchronize();
  }
  /// Device to host, after the work that writes the elements.
  static void copy_to_host(void* host, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    ATTN_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, cuda_backend::stream()));
    cuda_backend::synchronize();
  }
};

}  // namespace attn

namespace attn::cuda_backend {

/// A device copy of host elements: `auto x = to_device(host_tensor);`.
template <class T, class S>
tensor<std::remove_const_t<T>, S, cuda> to_device(const tensor_view<T, S, cpu>& host) {
  tensor<std::remove_const_t<T>, S, cuda> result(host.extents());
  if (result.size() != 0)
    ATTN_CUDA_CHECK(cudaMemcpy(result.data(), host.data(), result.bytes(), cudaMemcpyHostToDevice));
  return result;
}
template <class T, class S>
tensor<T, S, cuda> to_device(const tensor<T, S, cpu>& host) {
  return to_device(host.view());
}

/// A host copy of device elements; waits for the kernels that write them.
template <class T, class S>
tensor<std::remove_const_t<T>, S, cpu> to_host(const tensor_view<T, S, cuda>& device) {
  tensor<std::remove_const_t<T>, S, cpu> result(device.extents());
  if (result.size() != 0)
    ATTN_CUDA_CHECK(cudaMemcpy(result.data(), device.data(), result.bytes(), cudaMemcpyDeviceToHost));
  return result;
}
template <class T, class S>
tensor<T, S, cpu> to_host(const tensor<T, S, cuda>& device) {
  return to_host(device.view());
}

}  // namespace attn::cuda_backend
