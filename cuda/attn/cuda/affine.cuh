// A linear layer's product with its bias (and ReLU) on the GPU: one cuBLASLt matmul whose
// epilogue adds the bias and applies the ReLU (CUBLASLT_EPILOGUE_BIAS, _RELU_BIAS), instead of
// a GEMM and then an elementwise pass over its result (expr/affine.hpp names the pattern).
// Products cuBLASLt offers no algorithm for, double ones, batched ones and biases off 16-byte
// alignment take that second road: contract_into, then the bias (and ReLU) in one generated kernel.
// float, bfloat16 and float16 products go through cuBLASLt, the 16-bit ones on tensor cores
// with float accumulation, the bias added in float and the result rounded once.
#pragma once

#include <cublasLt.h>

#include <atomic>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <type_traits>

#include <attn/expr.hpp>

#include "contract.cuh"
#include "elementwise.cuh"
#include "memory.cuh"

namespace attn::cuda_backend {

/// The cuBLASLt handle of the calling thread for the current device (as blas_handle()).
inline cublasLtHandle_t blas_lt_handle() {
  return detail::thread_device_handle<cublasLtHandle_t, cublasLtCreate, cublasLtDestroy>();
}

/// How many products ran as one cuBLASLt matmul with an epilogue (for tests: the two-pass road
/// gives the same numbers, so only this tells which road was taken).
inline std::atomic<long long>& epilogue_products() {
  static std::atomic<long long> count{0};
  return count;
}

namespace detail {

/// The largest power of two (up to 256) that divides a pointer: cuBLASLt picks kernels by
/// the alignment its operands are promised.
inline std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

/// What decides a cuBLASLt plan: the column-major problem (see contract_into) and the
/// operands' alignments.
struct affine_key {
  int device;
  cudaDataType_t type;  // of A, B, D and the bias
  int m, n, k;  // cuBLAS's: D (m x n) = op(A) (m x k) · op(B) (k x n), column-major
  bool a_transposed, b_transposed, relu, tf32;
  std::uint32_t align_a, align_b, align_d, align_bias;
  auto operator<=>(const affine_key&) const = default;
};

/// The descriptors of one product shape and the algorithm cuBLASLt's heuristic chose for it.
class affine_plan {
 public:
  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;  // Hopper's kernels like 32 MiB

  explicit affine_plan(const affine_key& key) {
    // Accumulation and α, β in float whatever the operands (CUBLAS_COMPUTE_32F); the bias is of
    // D's type (cuBLASLt's default for 16-bit D).
    ATTN_CUDA_CHECK(cublasLtMatmulDescCreate(&matmul_, key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                             CUDA_R_32F));
    const cublasOperation_t op_a = key.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = key.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasLtEpilogue_t epilogue = key.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    set(CUBLASLT_MATMUL_DESC_TRANSA, op_a);
    set(CUBLASLT_MATMUL_DESC_TRANSB, op_b);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    // Stored shapes (before op): A is m x k, or k x m when transposed; B is k x n, or n x k.
    ATTN_CUDA_CHECK(cublasLtMatrixLayoutCreate(&a_, key.type, key.a_transposed ? key.k : key.m,
                                               key.a_transposed ? key.m : key.k, key.a_transposed ? key.k : key.m));
    ATTN_CUDA_CHECK(cublasLtMatrixLayoutCreate(&b_, key.type, key.b_transposed ? key.n : key.k,
                                               key.b_transposed ? key.k : key.n, key.b_transposed ? key.n : key.k));
    ATTN_CUDA_CHECK(cublasLtMatrixLayoutCreate(&d_, key.type, key.m, key.n, key.m));

    cublasLtMatmulPreference_t preference = nullptr;
    ATTN_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)>
        owned(preference, &cublasLtMatmulPreferenceDestroy);
    const std::uint64_t workspace = workspace_bytes;
    prefer(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace);
    prefer(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
    prefer(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
    prefer(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d);
    prefer(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d);
    // Some kernels assume a 16-byte-aligned bias whatever the heuristic was shown (PyTorch and
    // llm.c met misaligned-address faults): affine_into takes this road only for such biases.
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, reinterpret_cast<const void*>(std::uintptr_t{key.align_bias}));
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(blas_lt_handle(), matmul_, a_, b_, d_, d_,
                                                                 preference, 1, &heuristic_, &found);
    usable_ = status == CUBLAS_STATUS_SUCCESS && found > 0;
  }
  affine_plan(const affine_plan&) = delete;
  affine_plan& operator=(const affine_plan&) = delete;
  ~affine_plan() {
    if (d_) (void)cublasLtMatrixLayoutDestroy(d_);
    if (b_) (void)cublasLtMatrixLayoutDestroy(b_);
    if (a_) (void)cublasLtMatrixLayoutDestroy(a_);
    if (matmul_) (void)cublasLtMatmulDescDestroy(matmul_);
  }

  /// False when cuBLASLt has no algorithm for this shape and epilogue.
  bool usable() const { return usable_; }

  /// D = op(A)·op(B) + bias (then ReLU), enqueued on attn's stream. False (nothing done, the
  /// plan marked unusable) when cuBLASLt refuses the call as not supported.
  bool run(const void* a, const void* b, const void* bias, void* d) {
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
    const float one = 1, zero = 0;  // beta 0: C (= D) is not read
    scratch_ptr workspace = allocate_scratch(heuristic_.workspaceSize);
    const cublasStatus_t status = cublasLtMatmul(blas_lt_handle(), matmul_, &one, a, a_, b, b_, &zero, d, d_, d, d_,
                                                 &heuristic_.algo, workspace.get(), heuristic_.workspaceSize, stream());
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) {
      usable_ = false;
      return false;
    }
    ATTN_CUDA_CHECK(status);
    ++epilogue_products();
    return true;
  }

 private:
  template <class V>
  void set(cublasLtMatmulDescAttributes_t attribute, const V& value) {
    ATTN_CUDA_CHECK(cublasLtMatmulDescSetAttribute(matmul_, attribute, &value, sizeof value));
  }
  template <class V>
  static void prefer(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
                     const V& value) {
    ATTN_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof value));
  }

  cublasLtMatmulDesc_t matmul_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
  bool usable_ = false;
};

/// The calling thread's plan for a key, made on first use (a model has a handful of shapes).
inline affine_plan& plan_for(const affine_key& key) {
  thread_local std::map<affine_key, std::unique_ptr<affine_plan>> plans;
  auto& plan = plans[key];
  if (!plan) plan = std::make_unique<affine_plan>(key);
  return *plan;
}

/// The second road: the product into dst, then dst = [relu](dst + bias) in one kernel. For a
/// 16-bit dst the product goes to a float temporary instead, so that dst is rounded once.
template <class T, class S, class Product, class Bias>
void affine_in_two_passes(const tensor_view<T, S, cuda>& dst, const Product& product, const Bias& bias, bool relu) {
  if constexpr (is_float16_storage<std::remove_const_t<T>>) {
    const auto biased = product + broadcast(bias, dst.extents());
    if (relu) evaluate_elementwise(dst, attn::relu(biased));
    else evaluate_elementwise(dst, biased);
  } else {
    contract_into(dst, product);
    const auto biased = dst + broadcast(bias, dst.extents());
    if (relu) evaluate_elementwise(dst, attn::relu(biased));
    else evaluate_elementwise(dst, biased);
  }
}

}  // namespace detail

/// dst = product + bias (then ReLU, when `relu`), product an expr::contract and bias a view of
/// the product's last dimension; nothing in them may overlap dst.
template <class T, class S, class Product, class Bias>
void affine_into(const tensor_view<T, S, cuda>& dst, const Product& product, const Bias& bias, bool relu) {
  using V = std::remove_const_t<T>;
  using form = expr::matrix_form<Product>;
  const form matrices(product);
  const index_t batches = matrices.batches, m = matrices.m, n = matrices.n, k = matrices.k;
  if constexpr (!std::is_same_v<V, float> && !is_float16_storage<V>) {
    detail::affine_in_two_passes(dst, product, bias, relu);
  } else {
    // cuBLASLt reads n bias elements; products with other free dimensions of W than the bias's
    // one (expr/affine.hpp allows only that) or biases off 16-byte alignment take two passes.
    if (batches != 1 || m == 0 || n == 0 || k == 0 || bias.size() != n || detail::alignment_of(bias.data()) < 16) {
      detail::affine_in_two_passes(dst, product, bias, relu);
      return;
    }
    const auto a = detail::prepare_operand<typename form::a_rows_k, typename form::a_k_rows>(product.a);
    const auto b = detail::prepare_operand<typename form::b_k_cols, typename form::b_cols_k>(product.b);
    // Row-major Y (m x n) = X·W is column-major Yᵀ = Wᵀ·Xᵀ (contract_into): cuBLAS's A is our
    // b, its B our a, its D is n x m, and the bias runs along cuBLAS's rows: our columns.
    int device = 0;
    ATTN_CUDA_CHECK(cudaGetDevice(&device));
    const detail::affine_key key{device,
                                 detail::data_type<V>(),
                                 detail::blas_int(n, "free size of b"),
                                 detail::blas_int(m, "free size of a"),
                                 detail::blas_int(k, "contracted size"),
                                 b.transposed,
                                 a.transposed,
                                 relu,
                                 std::is_same_v<V, float> && tf32_products().load(),
                                 detail::alignment_of(b.data),
                                 detail::alignment_of(a.data),
                                 detail::alignment_of(dst.data()),
                                 detail::alignment_of(bias.data())};
    detail::affine_plan& plan = detail::plan_for(key);
    if (!plan.usable() || !plan.run(b.data, a.data, bias.data(), dst.data()))
      detail::affine_in_two_passes(dst, product, bias, relu);
  }
}

}  // namespace attn::cuda_backend
