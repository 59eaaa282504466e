// Reductions on the GPU: sum, max and mean over one named dimension, the operand seen as
// [outer, length, inner]. Reducing the last dimension (softmax, LayerNorm) gives contiguous
// rows: a warp, or a whole block for long rows, per row with shuffles. Otherwise one thread
// per output walks its column, and neighbouring threads read neighbouring elements.
#pragma once

#include <cstddef>
#include <type_traits>

#include <attn/expr.hpp>

#include "elementwise.cuh"
#include "memory.cuh"

namespace attn::cuda_backend {

namespace detail {

inline constexpr int reduce_block = 256;
inline constexpr unsigned full_warp = 0xffffffffu;

/// __shfl_down_sync has no overloads below 32 bits (bool, char, short): widen those.
template <class T>
__device__ T shuffle_down(T value, int offset) {
  if constexpr (sizeof(T) < sizeof(int)) {
    return static_cast<T>(__shfl_down_sync(full_warp, static_cast<int>(value), offset));
  } else {
    return __shfl_down_sync(full_warp, value, offset);
  }
}

/// Lane 0 ends with the combination of the warp's 32 values.
template <class Op, class T>
__device__ T warp_reduce(T value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = Op{}(value, shuffle_down(value, offset));
  return value;
}

/// Mean divides the sum by the count at the end, as Eigen's MeanReducer does.
template <class Op, class T>
__device__ T finish(T accumulated, index_t length) {
  if constexpr (std::is_same_v<Op, op::mean>) return accumulated / static_cast<T>(length);
  else return accumulated;
}

/// Contiguous rows (inner == 1): Group threads reduce each row, Group being a warp (short
/// rows, many of them: eight rows per block) or the whole block (long rows).
template <class Op, class T, int Group>
__global__ void __launch_bounds__(reduce_block)
    reduce_rows_kernel(const T* __restrict__ in, T* __restrict__ out, index_t rows, index_t length) {
  static_assert(Group == 32 || Group == reduce_block, "a group is a warp or the whole block");
  constexpr int rows_per_block = reduce_block / Group;
  constexpr int warps = reduce_block / 32;
  const int lane = static_cast<int>(threadIdx.x) % Group;
  const index_t step = static_cast<index_t>(gridDim.x) * rows_per_block;
  // With Group == reduce_block every thread of the block runs the same iterations, as the
  // __syncthreads below require.
  for (index_t row = static_cast<index_t>(blockIdx.x) * rows_per_block + threadIdx.x / Group;
       row < rows; row += step) {
    const T* source = in + row * length;
    T accumulated = Op::template identity<T>();
    for (index_t j = lane; j < length; j += Group) accumulated = Op{}(accumulated, source[j]);
    accumulated = warp_reduce<Op>(accumulated);
    if constexpr (Group > 32) {
      __shared__ T partial[warps];
      const int warp = static_cast<int>(threadIdx.x) / 32;
      if (threadIdx.x % 32 == 0) partial[warp] = accumulated;
      __syncthreads();
      if (warp == 0) {
        accumulated = lane < warps ? partial[lane] : Op::template identity<T>();
        accumulated = warp_reduce<Op>(accumulated);
      }
      __syncthreads();  // `partial` is rewritten by the next row
    }
    if (lane == 0) out[row] = finish<Op>(accumulated, length);
  }
}

/// Strided columns (inner > 1): one thread per output element.
template <class Op, class T>
__global__ void __launch_bounds__(reduce_block)
    reduce_columns_kernel(const T* __restrict__ in, T* __restrict__ out, index_t outer,
                          index_t length, index_t inner) {
  const index_t count = outer * inner;
  const index_t step = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step) {
    const index_t o = i / inner;
    const T* source = in + o * length * inner + (i - o * inner);
    T accumulated = Op::template identity<T>();
    for (index_t j = 0; j < length; ++j) accumulated = Op{}(accumulated, source[j * inner]);
    out[i] = finish<Op>(accumulated, length);
  }
}

/// From this row length on, a block per row beats a warp per row: a warp would loop 32
/// times or more, while the block's final combination costs only two barriers.
inline constexpr index_t block_per_row_from = 1024;

/// Launches the kernel that suits the layout. (Template arguments through std::type_identity_t:
/// see launch_elementwise in elementwise.cuh for why.)
template <class Op, class T>
void launch_reduce(const T* in, T* out, index_t outer, index_t length, index_t inner) {
  constexpr int block = reduce_block;
  if (inner == 1 && length >= block_per_row_from) {
    reduce_rows_kernel<std::type_identity_t<Op>, std::type_identity_t<T>, block>
        <<<grid_for(outer * block, block), block, 0, stream()>>>(in, out, outer, length);
  } else if (inner == 1) {
    reduce_rows_kernel<std::type_identity_t<Op>, std::type_identity_t<T>, 32>
        <<<grid_for(outer * 32, block), block, 0, stream()>>>(in, out, outer, length);
  } else {
    reduce_columns_kernel<std::type_identity_t<Op>, std::type_identity_t<T>>
        <<<grid_for(outer * inner, block), block, 0, stream()>>>(in, out, outer, length, inner);
  }
  ATTN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace detail

/// Evaluates `reduction` (an expr::reduce) into dst. The operand is read in place when it is
/// a tensor view or a reshape of one, else evaluated first into a temporary.
template <class T, class S, class E>
void reduce_into(const tensor_view<T, S, cuda>& dst, const E& reduction) {
  using V = std::remove_const_t<T>;
  using A = std::remove_cvref_t<decltype(reduction.a)>;
  using source_shape = typename A::shape_type;
  using D = typename E::reduced_dim;
  using Op = typename E::op_type;
  static_assert(std::is_same_v<Op, op::sum> || std::is_same_v<Op, op::max> ||
                    std::is_same_v<Op, op::mean>,
                "attn::cuda: no lowering for this reduction");

  const auto& sizes = reduction.a.extents();
  constexpr std::size_t axis = dim_index<source_shape, D>;
  const index_t outer = detail::product(sizes, 0, axis);
  const index_t inner = detail::product(sizes, axis + 1, source_shape::rank);
  const index_t length = sizes[axis];
  if (outer * inner == 0) return;

  workspace ws;
  const V* source = nullptr;
  if constexpr (detail::is_viewable<A>) {
    source = detail::as_view(reduction.a).data();
  } else {
    const auto temporary = ws.template make<V>(sizes);
    evaluate_into(temporary, reduction.a);
    source = temporary.data();
  }

  detail::launch_reduce<Op>(source, dst.data(), outer, length, inner);
}

}  // namespace attn::cuda_backend
