// Contractions on the GPU: one strided-batched cuBLAS GEMM, or for small products
// (small_products.cuh) one launch of attn's own kernel. Operands already laid out as
// [batch..., rows, k] or [batch..., k, rows] (views, or reshapes of views) are used in place,
// transposed or not; any other operand is first evaluated into the first layout (the same
// rule as cpu/contract.hpp).
#pragma once

#include <cublas_v2.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <attn/expr.hpp>

#include "elementwise.cuh"
#include "memory.cuh"
#include "small_products.cuh"

namespace attn::cuda_backend {

/// Whether fp32 products may round their inputs to TF32 on tensor cores (about 8× faster on
/// Ampere and Hopper, 10 mantissa bits instead of 23). Off by default, as cuBLAS and PyTorch's
/// matmul have it: the GPU then computes what the CPU computes, to fp32 rounding.
inline std::atomic<bool>& tf32_products() {
  static std::atomic<bool> allowed{false};
  return allowed;
}

namespace detail {
/// The calling thread's library handle for the current device, made by `create` on first use
/// and given to `destroy` at thread exit. Per thread because cuBLAS handles must not be shared
/// by threads that set different streams; per device because a handle belongs to the device
/// that was current when it was made.
template <class Handle, auto create, auto destroy>
Handle thread_device_handle() {
  struct handles {
    std::vector<Handle> by_device;
    handles() = default;
    handles(const handles&) = delete;
    handles& operator=(const handles&) = delete;
    ~handles() {
      for (Handle h : by_device)
        if (h != nullptr) (void)destroy(h);  // at thread exit: nowhere to report
    }
  };
  thread_local handles cache;
  int device = 0;
  ATTN_CUDA_CHECK(cudaGetDevice(&device));
  const auto at = static_cast<std::size_t>(device);
  if (at >= cache.by_device.size()) cache.by_device.resize(at + 1, nullptr);
  Handle& handle = cache.by_device[at];
  if (handle == nullptr) ATTN_CUDA_CHECK(create(&handle));
  return handle;
}
}  // namespace detail

/// The cuBLAS handle of the calling thread for the current device, bound to attn's stream.
inline cublasHandle_t blas_handle() {
  const cublasHandle_t handle = detail::thread_device_handle<cublasHandle_t, cublasCreate, cublasDestroy>();
  ATTN_CUDA_CHECK(cublasSetStream(handle, stream()));
  ATTN_CUDA_CHECK(cublasSetMathMode(handle, tf32_products() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return handle;
}

namespace detail {

/// An operand as a pointer to [batch..., P, Q] elements; `transposed` when stored as
/// [batch..., Q, P] instead. `storage` owns a temporary when one was needed.
template <class T>
struct gemm_operand {
  const T* data = nullptr;
  bool transposed = false;
  scratch_ptr storage;
};

/// Finds or makes an operand laid out as Preferred ([batch, rows, k]) or Transposed. Views
/// and reshapes of views (heads split from d_model, a renamed length) are used in place.
template <class Preferred, class Transposed, class X>
gemm_operand<typename X::value_type> prepare_operand(const X& x) {
  using T = typename X::value_type;
  if constexpr (is_viewable<X> && std::is_same_v<typename X::shape_type, Preferred>) {
    return {as_view(x).data(), false, {}};
  } else if constexpr (is_viewable<X> && std::is_same_v<typename X::shape_type, Transposed>) {
    return {as_view(x).data(), true, {}};
  } else {
    const auto sizes = gather_extents<Preferred>(x.extents());
    scratch_ptr storage = allocate_scratch(static_cast<std::size_t>(sizes.size()) * sizeof(T));
    const tensor_view<T, Preferred, cuda> laid_out(static_cast<T*>(storage.get()), sizes);
    if constexpr (std::is_same_v<typename X::shape_type, Preferred>) {
      evaluate_into(laid_out, x);
    } else {
      evaluate_into(laid_out, expr::permute<Preferred, X>(x));
    }
    return {laid_out.data(), false, std::move(storage)};
  }
}

/// cuBLAS's name of an element type.
template <class T>
constexpr cudaDataType_t data_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, double>) return CUDA_R_64F;
  else if constexpr (std::is_same_v<T, bfloat16>) return CUDA_R_16BF;
  else if constexpr (std::is_same_v<T, float16>) return CUDA_R_16F;
  else static_assert(sizeof(T) == 0, "attn::cuda: cuBLAS multiplies float, double, bfloat16 and float16");
}

/// C = A·B of 16-bit operands on tensor cores, accumulated in float (CUBLAS_COMPUTE_32F), C
/// rounded once to its own type (16 bits, or float for a temporary read on in float).
template <class In, class Out>
cublasStatus_t gemm_ex_strided_batched(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b, int m,
                                       int n, int k, const In* a, int lda, long long stride_a, const In* b, int ldb,
                                       long long stride_b, Out* c, int ldc, long long stride_c, int batches) {
  const float one = 1, zero = 0;
  return cublasGemmStridedBatchedEx(handle, op_a, op_b, m, n, k, &one, a, data_type<In>(), lda, stride_a, b,
                                    data_type<In>(), ldb, stride_b, &zero, c, data_type<Out>(), ldc, stride_c,
                                    batches, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

inline cublasStatus_t gemm_strided_batched(cublasHandle_t handle, cublasOperation_t op_a,
                                           cublasOperation_t op_b, int m, int n, int k,
                                           const float* alpha, const float* a, int lda,
                                           long long stride_a, const float* b, int ldb,
                                           long long stride_b, const float* beta, float* c,
                                           int ldc, long long stride_c, int batches) {
  return cublasSgemmStridedBatched(handle, op_a, op_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                                   stride_b, beta, c, ldc, stride_c, batches);
}
inline cublasStatus_t gemm_strided_batched(cublasHandle_t handle, cublasOperation_t op_a,
                                           cublasOperation_t op_b, int m, int n, int k,
                                           const double* alpha, const double* a, int lda,
                                           long long stride_a, const double* b, int ldb,
                                           long long stride_b, const double* beta, double* c,
                                           int ldc, long long stride_c, int batches) {
  return cublasDgemmStridedBatched(handle, op_a, op_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                                   stride_b, beta, c, ldc, stride_c, batches);
}

/// small_products::multiply's launch, its types through std::type_identity_t as
/// launch_elementwise's (elementwise.cuh): spelled through the expression's `value_type`, they
/// reach nvcc's host stub in a syntax g++ rejects.
template <class In, class Out>
void small_product(const In* a, const In* b, Out* c, index_t batches, index_t m, index_t n, index_t k,
                   bool a_transposed, bool b_transposed) {
  const small_products::staging<In> layout(m, n, k);
  small_products::multiply<std::type_identity_t<In>, std::type_identity_t<Out>>
      <<<unsigned((batches + small_products::warps - 1) / small_products::warps), small_products::warps * 32,
         layout.block_bytes(), stream()>>>(a, b, c, batches, m, n, k, a_transposed, b_transposed);
  ATTN_CUDA_CHECK(cudaGetLastError());
}

/// cuBLAS takes sizes as int.
inline int blas_int(index_t value, const char* what) {
  if (value > INT_MAX)
    throw std::length_error(std::string("attn::contract: ") + what + " of " +
                            std::to_string(value) + " exceeds cuBLAS's 32-bit sizes");
  return static_cast<int>(value);
}

}  // namespace detail

/// Evaluates `contraction` (an expr::contract) into dst: C[b] (m x n) = A[b] (m x k) B[b]
/// (k x n) for every batch b, all row-major. Operands of 16 bits are multiplied on tensor
/// cores with float accumulation; dst then holds 16 bits or float. Small products of 16 bits or
/// float (small_products::suits: attention's at sentences of a few words) go to a kernel of
/// attn's own instead of cuBLAS, accumulated in float all the same (in float too where
/// tf32_products() lets cuBLAS round to TF32).
template <class T, class S, class E>
void contract_into(const tensor_view<T, S, cuda>& dst, const E& contraction) {
  using V = std::remove_const_t<T>;
  using In = typename E::value_type;
  static_assert(std::is_same_v<In, float> || std::is_same_v<In, double> || is_float16_storage<In>,
                "attn::contract: the CUDA backend contracts float, double, bfloat16 or float16 tensors");
  static_assert(std::is_same_v<V, In> || std::is_same_v<V, accumulate_t<In>>,
                "attn::contract: the destination holds the operands' type or their compute type");
  using form = expr::matrix_form<E>;
  const form matrices(contraction);
  const index_t batches = matrices.batches, m = matrices.m, n = matrices.n, k = matrices.k;
  if (batches == 0 || m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum; cuBLAS would reject the zero leading dimensions
    ATTN_CUDA_CHECK(cudaMemsetAsync(dst.data(), 0, static_cast<std::size_t>(dst.size()) * sizeof(V),
                                    stream()));
    return;
  }

  const auto a = detail::prepare_operand<typename form::a_rows_k, typename form::a_k_rows>(contraction.a);
  const auto b = detail::prepare_operand<typename form::b_k_cols, typename form::b_cols_k>(contraction.b);
  if constexpr (small_products::takes<In>) {
    if (small_products::enabled() && small_products::suits<In>(m, n, k) &&
        batches / small_products::warps < index_t{INT_MAX}) {  // the grid's blocks
      detail::small_product(a.data, b.data, dst.data(), batches, m, n, k, a.transposed, b.transposed);
      return;
    }
  }

  // cuBLAS is column-major, and a row-major m x n matrix is a column-major n x m one: so
  // compute Cᵀ = Bᵀ Aᵀ. Row-major B (k x n) read column-major is already Bᵀ (op N, ld n);
  // stored transposed (n x k) it is B (op T, ld k). Likewise for A with m.
  const cublasOperation_t op_b = b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int rows = detail::blas_int(n, "free size of b"), columns = detail::blas_int(m, "free size of a");
  const int depth = detail::blas_int(k, "contracted size");
  const int ld_b = detail::blas_int(b.transposed ? k : n, "leading dimension of b");
  const int ld_a = detail::blas_int(a.transposed ? m : k, "leading dimension of a");
  const int ld_c = detail::blas_int(n, "leading dimension of c"), count = detail::blas_int(batches, "batch count");
  if constexpr (is_float16_storage<In>) {
    ATTN_CUDA_CHECK(detail::gemm_ex_strided_batched(blas_handle(), op_b, op_a, rows, columns, depth, b.data, ld_b,
                                                    k * n, a.data, ld_a, m * k, dst.data(), ld_c, m * n, count));
  } else {
    const V one = 1;
    const V zero = 0;  // with beta 0, cuBLAS does not read C: its old contents may be anything
    ATTN_CUDA_CHECK(detail::gemm_strided_batched(blas_handle(), op_b, op_a, rows, columns, depth, &one, b.data, ld_b,
                                                 k * n, a.data, ld_a, m * k, &zero, dst.data(), ld_c, m * n, count));
  }
}

}  // namespace attn::cuda_backend
