// Batched products of small matrices on CUDA cores, a warp a matrix: attention's six products a
// layer (Q·Kᵀ and P·V forward; dO·Vᵀ, Pᵀ·dO, dS·K and dSᵀ·Q backward) at sentences of a few
// words, [10, 64] by [64, 10] thousands of times over. cuBLAS's batched GEMM took 80 µs a launch
// for them in a big bf16 step on an H100, about six times their bytes' time, and those products
// were 18 % of the step (docs/benchmarks.md, "GPU: the fifth run"). Here each warp copies its
// matrix's two operands whole into shared memory (16 bytes a load where they allow), A as Aᵀ
// and B as B whatever their layouts, then each lane computes rows_at_once rows of a column of C
// at a time, accumulating in float; C is rounded once to its type, as cuBLAS's CUBLAS_COMPUTE_32F
// does. contract.cuh takes this road for the products that `suits` admits, unless
// ATTN_SMALL_PRODUCTS=0. Device code and host checks alone, no CUDA run-time: the CPU emulator
// runs the kernel (tests/unit/cuda/small_products_emulated_test.cpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include <attn/core.hpp>

#include "elementwise_vectors.cuh"
#include "shared_memory.cuh"
#include "switches.cuh"

namespace attn::cuda_backend::small_products {

/// Matrices a block takes, a warp each.
inline constexpr int warps = 4;
/// Rows of C a lane accumulates at a time (4 multiply-adds a loaded element of B).
inline constexpr int rows_at_once = 4;
/// The largest product taken here: multiply-adds a matrix (CUDA cores, not tensor cores), and
/// bytes of shared memory a warp stages (32 KiB a block, under the 48 KiB a launch has without
/// asking for more).
inline constexpr index_t largest_multiply_adds = index_t{1} << 16;
inline constexpr index_t largest_staged_bytes = 8192;

/// The operand types taken here: 16 bits and float (double stays on cuBLAS).
template <class In>
inline constexpr bool takes = is_float16_storage<In> || std::is_same_v<In, float>;

/// Whether contract.cuh multiplies the products that `suits` admits here: yes, unless
/// ATTN_SMALL_PRODUCTS=0 in the environment (read once; tests and benchmarks set it both ways).
inline bool& enabled() {
  static bool on = on_unless_zero("ATTN_SMALL_PRODUCTS");
  return on;
}

__host__ __device__ constexpr index_t rounded_up(index_t x, index_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

/// Elements of a warp's staging: Aᵀ as [k][m rounded up to rows_at_once] (the rows past m zero),
/// then B as [k][n], each part a whole number of 16 bytes.
template <class In>
struct staging {
  index_t a_stride, a_elements, elements;
  __host__ __device__ staging(index_t m, index_t n, index_t k)
      : a_stride(rounded_up(m, rows_at_once)),
        a_elements(rounded_up(k * a_stride, index_t(vector_width<In>))),
        elements(a_elements + rounded_up(k * n, index_t(vector_width<In>))) {}
  std::size_t block_bytes() const { return std::size_t(warps) * std::size_t(elements) * sizeof(In); }
};

/// Whether the product of [m, k] by [k, n] is small enough to take here.
template <class In>
bool suits(index_t m, index_t n, index_t k) {
  if (m <= 0 || n <= 0 || k <= 0 || m > largest_multiply_adds || n > largest_multiply_adds) return false;
  if (k > largest_multiply_adds / m || m * k > largest_multiply_adds / n) return false;
  return index_t(sizeof(In)) * staging<In>(m, n, k).elements <= largest_staged_bytes;
}

/// Reads `count` consecutive elements from `from` (global memory) across the warp: on_run(at, run)
/// for runs of V elements from `at`, 16 bytes a load, four loads a lane in flight before any run
/// is handed on (the caller's stores to shared memory, an address the compiler cannot tell from
/// `from`, would otherwise wait for each load in turn); where `from` is off 16 bytes, the count is
/// not whole runs or `runs` is false, on_element(at, x) for each element instead.
template <class In, class OnRun, class OnElement>
__device__ void read_runs(const In* from, index_t count, bool runs, OnRun&& on_run, OnElement&& on_element) {
  constexpr int V = vector_width<In>, in_flight = 4;
  const int lane = int(threadIdx.x) % 32;
  if (runs && on_16_bytes(from) && count % V == 0) {
    for (index_t first = index_t(lane) * V; first < count; first += index_t(32) * V * in_flight) {
      alignas(16) In loaded[in_flight][V];
#pragma unroll
      for (int u = 0; u < in_flight; ++u)
        if (first + u * 32 * V < count) copy_run<V>(loaded[u], from + first + u * 32 * V);
#pragma unroll
      for (int u = 0; u < in_flight; ++u)
        if (first + u * 32 * V < count) on_run(first + u * 32 * V, loaded[u]);
    }
  } else {
    for (index_t e = lane; e < count; e += 32) on_element(e, from[e]);
  }
}

/// Indices inside one matrix: `suits` admits at most 2¹⁶ multiply-adds a product, so they fit in
/// 32 bits, whose division nvcc makes inline (a 64-bit one is a call).
using matrix_index = unsigned;

/// Copies `count` consecutive elements from `from` (global memory) as put(row, column, x), rows
/// of `row_length`.
template <class In, class Put>
__device__ void stage(const In* from, index_t count, index_t row_length, Put&& put) {
  const matrix_index length = matrix_index(row_length);
  read_runs(
      from, count, true,
      [&](index_t at, const In* run) {
        matrix_index row = matrix_index(at) / length, column = matrix_index(at) % length;
#pragma unroll
        for (int e = 0; e < vector_width<In>; ++e) {
          put(row, column, run[e]);
          if (++column == length) column = 0, ++row;
        }
      },
      [&](index_t at, In x) { put(matrix_index(at) / length, matrix_index(at) % length, x); });
}

/// Copies `count` consecutive elements from `from` (global memory) to `to` (shared memory), 16
/// bytes a store where `to` is on 16 bytes too.
template <class In>
__device__ void copy_whole(In* to, const In* from, index_t count) {
  read_runs(
      from, count, on_16_bytes(to),
      [&](index_t at, const In* run) { copy_run<vector_width<In>>(to + at, run); },
      [&](index_t at, In x) { to[at] = x; });
}

/// C[b] = A[b]·B[b] for b < batches, row-major: A [m, k] (or [k, m] when a_transposed), B [k, n]
/// (or [n, k]), C [m, n], each matrix after the previous one. Blocks of `warps` warps, a warp a
/// matrix, staging<In>::block_bytes of dynamic shared memory.
template <class In, class Out>
__global__ void __launch_bounds__(warps * 32)
    multiply(const In* a, const In* b, Out* c, index_t batches, index_t m, index_t n, index_t k, bool a_transposed,
             bool b_transposed) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const index_t matrix = index_t(blockIdx.x) * warps + warp;
  if (matrix >= batches) return;  // the whole warp: nothing below waits for the block
  const staging<In> layout(m, n, k);
  In* const a_t = dynamic_shared_memory<In>() + warp * layout.elements;  // Aᵀ [k][a_stride]
  In* const b_s = a_t + layout.a_elements;                                // B [k][n]
  const index_t stride = layout.a_stride;
  const matrix_index padding = matrix_index(stride - m);
  for (matrix_index e = lane; e < matrix_index(k) * padding; e += 32) a_t[e / padding * stride + m + e % padding] = In(0.f);
  const In* const a_matrix = a + matrix * m * k;
  const In* const b_matrix = b + matrix * k * n;
  if (a_transposed && stride == m) copy_whole(a_t, a_matrix, m * k);  // stored [k][m]: already Aᵀ
  else
    stage(a_matrix, m * k, a_transposed ? m : k, [&](matrix_index row, matrix_index column, In x) {
      if (a_transposed) a_t[row * stride + column] = x;
      else a_t[column * stride + row] = x;  // stored [m][k]
    });
  if (!b_transposed) copy_whole(b_s, b_matrix, k * n);  // stored [k][n], as staged
  else stage(b_matrix, k * n, k, [&](matrix_index row, matrix_index column, In x) { b_s[column * n + row] = x; });
  __syncwarp();
  // A lane's task: rows_at_once rows of one column of C. Tasks run over columns first, so that
  // a narrow C (n < 32: scores at a few words) still keeps every lane busy.
  Out* const out = c + matrix * m * n;
  const matrix_index columns = matrix_index(n), tasks = matrix_index(stride / rows_at_once) * columns;
  for (matrix_index task = lane; task < tasks; task += 32) {
    const index_t first_row = index_t(task / columns) * rows_at_once, j = task % columns;
    float acc[rows_at_once] = {};
#pragma unroll 4
    for (index_t p = 0; p < k; ++p) {
      const float from_b = float(b_s[p * n + j]);
      alignas(16) In from_a[rows_at_once];  // A's rows first_row … at column p: one load
      copy_run<rows_at_once>(from_a, a_t + p * stride + first_row);
#pragma unroll
      for (int r = 0; r < rows_at_once; ++r) acc[r] += float(from_a[r]) * from_b;
    }
#pragma unroll
    for (int r = 0; r < rows_at_once; ++r)
      if (first_row + r < m) out[(first_row + r) * n + j] = Out(acc[r]);
  }
}

}  // namespace attn::cuda_backend::small_products
