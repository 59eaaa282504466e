// Device memory for the CUDA backend: attn::memory<cuda>, stream-ordered scratch, host <-> device copies, error checks.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
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
/// freeing temporaries between kernels then costs no device synchronisation. Falls back to
/// cudaMalloc on devices without memory pools.
inline scratch_ptr allocate_scratch(std::size_t bytes) {
  if (bytes == 0) return scratch_ptr(nullptr, {});
  void* p = nullptr;
  const cudaError_t status = cudaMallocAsync(&p, bytes, stream());
  if (status == cudaSuccess) return scratch_ptr(p, {true});
  if (status != cudaErrorNotSupported)
    check(status, "cudaMallocAsync(" + std::to_string(bytes) + " bytes)");
  (void)cudaGetLastError();
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

/// Memory on the current CUDA device, for attn::tensor<T, S, cuda>.
template <>
struct memory<cuda> {
  /// What cudaMalloc guarantees; more than any vector load needs.
  static constexpr std::size_t alignment = 256;

  /// Zero-filled device memory, as memory<cpu> gives zero-filled host memory. Never returns
  /// null for a non-zero size; throws cuda_error (a std::runtime_error) when out of memory.
  static void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    cuda_backend::check(cudaMalloc(&p, bytes),
                        "cudaMalloc(" + std::to_string(bytes) + " bytes)");
    const cudaError_t status = cudaMemsetAsync(p, 0, bytes, cuda_backend::stream());
    if (status != cudaSuccess) {
      (void)cudaFree(p);
      cuda_backend::check(status, "cudaMemsetAsync");
    }
    return p;
  }
  /// Waits for attn's stream first, so that a tensor may be destroyed right after enqueuing a
  /// kernel that reads it (cudaFree itself only "may" synchronise). Errors are dropped: a
  /// destructor cannot report them, and at exit the runtime may already be unloading.
  static void deallocate(void* p) noexcept {
    if (p == nullptr) return;
    (void)cudaStreamSynchronize(cuda_backend::stream());
    (void)cudaFree(p);
  }
  /// Device to device, ordered after the kernels already enqueued.
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0 || dst == src) return;
    ATTN_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_backend::stream()));
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
