// Reductions on the GPU: sum, max and mean over one named dimension, the operand seen as
// [outer, length, inner]; reduce_kernels.cuh has the kernels and says how each layout is cut.
#pragma once

#include <cstddef>
#include <type_traits>

#include <attn/expr.hpp>

#include "elementwise.cuh"
#include "memory.cuh"
#include "reduce_kernels.cuh"

namespace attn::cuda_backend {

namespace detail {

/// From this row length on, a block per row beats a warp per row: a warp would loop 32
/// times or more, while the block's final combination costs only two barriers.
inline constexpr index_t block_per_row_from = 1024;

/// Launches the kernels that suit the layout (reduce_kernels.cuh). (Template arguments through
/// std::type_identity_t: see launch_elementwise in elementwise.cuh for why.)
template <class Op, class In, class Out>
void launch_reduce(const In* in, Out* out, index_t outer, index_t length, index_t inner) {
  namespace kernels = reduce_kernels;
  using O = std::type_identity_t<Op>;
  using I = std::type_identity_t<In>;
  using R = std::type_identity_t<Out>;
  constexpr int block = kernels::block;
  const kernels::column_chunks chunks(length, outer * inner);
  if (inner == 1 && length >= block_per_row_from) {
    kernels::rows_kernel<O, I, R, block>
        <<<grid_for(outer * block, block), block, 0, stream()>>>(in, out, outer, length);
  } else if (inner == 1) {
    kernels::rows_kernel<O, I, R, 32><<<grid_for(outer * 32, block), block, 0, stream()>>>(in, out, outer, length);
  } else if (!chunks.cut()) {
    kernels::columns_kernel<O, I, R>
        <<<grid_for(outer * inner, block), block, 0, stream()>>>(in, out, outer, length, inner);
  } else {
    using T = std::type_identity_t<accumulate_t<In>>;
    const index_t outputs = outer * inner;
    const scratch_ptr partial = allocate_scratch(sizeof(T) * std::size_t(outputs * chunks.count));
    const unsigned column_blocks = unsigned(kernels::column_chunks::column_blocks(outputs));
    kernels::column_chunks_kernel<O, I, T, false><<<dim3(column_blocks, unsigned(chunks.count)), block, 0, stream()>>>(
        in, static_cast<T*>(partial.get()), outputs, length, inner, chunks.rows, length);
    // Each column's chunks, [chunks, outputs], as one chunk.
    kernels::column_chunks_kernel<O, T, R, true><<<column_blocks, block, 0, stream()>>>(
        static_cast<const T*>(partial.get()), out, outputs, chunks.count, outputs, chunks.count, length);
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
