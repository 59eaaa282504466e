// Reductions on the GPU: sum, max and mean over one named dimension, the operand seen as
// [outer, length, inner]. Reducing the last dimension (softmax, LayerNorm) gives contiguous
// rows: a warp, or a whole block for long rows, per row with shuffles. Otherwise one thread
// per output walks its column, and neighbouring threads read neighbouring elements. 16-bit
// operands are summed in float (accumulate_t), the result rounded once where it is stored.
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
/// rows, many of them: eight rows per block) or the whole block (long rows). In is the
/// operand's element type, Out the result's; both are combined in T = accumulate_t<In>.
template <class Op, class In, class Out, int Group>
__global__ void __launch_bounds__(reduce_block)
    reduce_rows_kernel(const In* __restrict__ in, Out* __restrict__ out, index_t rows, index_t length) {
  using T = accumulate_t<In>;
  static_assert(Group == 32 || Group == reduce_block, "a group is a warp or the whole block");
  constexpr int rows_per_block = reduce_block / Group;
  constexpr int warps = reduce_block / 32;
  const int lane = static_cast<int>(threadIdx.x) % Group;
  const index_t step = static_cast<index_t>(gridDim.x) * rows_per_block;
  // With Group == reduce_block every thread of the block runs the same iterations, as the
  // __syncthreads below require.
  for (index_t row = static_cast<index_t>(blockIdx.x) * rows_per_block + threadIdx.x / Group;
       row < rows; row += step) {
    const In* source = in + row * length;
    T accumulated = Op::template identity<T>();
    for (index_t j = lane; j < length; j += Group) accumulated = Op{}(accumulated, T(source[j]));
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
    if (lane == 0) out[row] = static_cast<Out>(finish<Op>(accumulated, length));
  }
}

/// Strided columns (inner > 1): one thread per output element.
template <class Op, class In, class Out>
__global__ void __launch_bounds__(reduce_block)
    reduce_columns_kernel(const In* __restrict__ in, Out* __restrict__ out, index_t outer,
                          index_t length, index_t inner) {
  using T = accumulate_t<In>;
  const index_t count = outer * inner;
  const index_t step = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step) {
    const index_t o = i / inner;
    const In* source = in + o * length * inner + (i - o * inner);
    T accumulated = Op::template identity<T>();
    for (index_t j = 0; j < length; ++j) accumulated = Op{}(accumulated, T(source[j * inner]));
    out[i] = static_cast<Out>(finish<Op>(accumulated, length));
  }
}

/// From this row length on, a block per row beats a warp per row: a warp would loop 32
/// times or more, while the block's final combination costs only two barriers.
inline constexpr index_t block_per_row_from = 1024;

/// Launches the kernel that suits the layout. (Template arguments through std::type_identity_t:
/// see launch_elementwise in elementwise.cuh for why.)
template <class Op, class In, class Out>
void launch_reduce(const In* in, Out* out, index_t outer, index_t length, index_t inner) {
  constexpr int block = reduce_block;
  if (inner == 1 && length >= block_per_row_from) {
    reduce_rows_kernel<std::type_identity_t<Op>, std::type_identity_t<In>, std::type_identity_t<Out>, block>
        <<<grid_for(outer * block, block), block, 0, stream()>>>(in, out, outer, length);
  } else if (inner == 1) {
    reduce_rows_kernel<std::type_identity_t<Op>, std::type_identity_t<In>, std::type_identity_t<Out>, 32>
        <<<grid_for(outer * 32, block), block, 0, stream()>>>(in, out, outer, length);
  } else {
    reduce_columns_kernel<std::type_identity_t<Op>, std::type_identity_t<In>, std::type_identity_t<Out>>
        <<<grid_for(outer * inner, block), block, 0, stream()>>>(in, out, outer, length, inner);
  }
  ATTN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace detail

/// Evaluates `reduction` (an expr::reduce) into dst. The operand is read in place when it is
/// a tensor view or a reshape of one, else evaluated first into a temporary.
template <class T, class S, class E>
void reduce_into(const tensor_view<T, S, cuda>& dst, const E& reduction) {
  using A = std::remove_cvref_t<decltype(reduction.a)>;
  using V = typename A::value_type;
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
  if constexpr (detail::is_viewable<A>) {
    detail::launch_reduce<Op>(detail::as_view(reduction.a).data(), dst.data(), outer, length, inner);
  } else {  // an expression: evaluated first, in its compute type (float for 16-bit operands)
    const auto temporary = ws.template make<accumulate_t<V>>(sizes);
    evaluate_into(temporary, reduction.a);
    detail::launch_reduce<Op>(temporary.data(), dst.data(), outer, length, inner);
  }
}

}  // namespace attn::cuda_backend
