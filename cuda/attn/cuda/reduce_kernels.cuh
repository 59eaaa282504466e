// The kernels of the GPU's reductions (reduce.cuh launches them): device code and the host's
// choice of grid, so that the CPU emulator (emulator.hpp) runs them too.
//
// The operand is seen as [outer, length, inner]. Reducing the last dimension (softmax,
// LayerNorm) gives contiguous rows: a warp, or a whole block for long rows, per row with
// shuffles. Otherwise each output is a column, and neighbouring outputs read neighbouring
// elements. A long column is cut into chunks of rows that blocks sum side by side, and a second
// launch combines each column's chunks in a fixed order: a bias's gradient is a sum over every
// position of a batch, 512 columns of 25 000 rows, which one thread a column walked on two
// of an H100's 132 multiprocessors. 16-bit operands are combined in float (accumulate_t), the
// result rounded once where it is stored.
#pragma once

#include <attn/core.hpp>
#include <attn/expr/ops.hpp>

#include <algorithm>
#include <type_traits>

namespace attn::cuda_backend::reduce_kernels {

inline constexpr int block = 256;
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
__global__ void __launch_bounds__(block)
    rows_kernel(const In* __restrict__ in, Out* __restrict__ out, index_t rows, index_t length) {
  using T = accumulate_t<In>;
  static_assert(Group == 32 || Group == block, "a group is a warp or the whole block");
  constexpr int rows_per_block = block / Group;
  constexpr int warps = block / 32;
  const int lane = static_cast<int>(threadIdx.x) % Group;
  const index_t step = static_cast<index_t>(gridDim.x) * rows_per_block;
  // With Group == block every thread of the block runs the same iterations, as the
  // __syncthreads below require.
  for (index_t row = static_cast<index_t>(blockIdx.x) * rows_per_block + threadIdx.x / Group; row < rows;
       row += step) {
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

/// Short strided columns (inner > 1): one thread per output element walks its column.
template <class Op, class In, class Out>
__global__ void __launch_bounds__(block)
    columns_kernel(const In* __restrict__ in, Out* __restrict__ out, index_t outer, index_t length, index_t inner) {
  using T = accumulate_t<In>;
  const index_t count = outer * inner;
  const index_t step = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    const index_t o = i / inner;
    const In* source = in + o * length * inner + (i - o * inner);
    T accumulated = Op::template identity<T>();
    for (index_t j = 0; j < length; ++j) accumulated = Op{}(accumulated, T(source[j * inner]));
    out[i] = static_cast<Out>(finish<Op>(accumulated, length));
  }
}

/// A long column's chunks: rows a chunk, and how many. Enough chunks that the blocks number
/// about 2 048 (a GPU's worth several times over), each at least 128 rows; no cut when the
/// outputs alone make that many blocks or a column is short. The cut depends on the shape
/// alone, so a shape's sums have the same bits on every GPU.
struct column_chunks {
  /// From this column length on, columns may be cut: below it one thread walks a column in
  /// about as long as a chunk takes.
  static constexpr index_t cut_from = 256;
  static constexpr index_t rows_at_least = 128;
  /// Chunks are at most this many, far below a grid's y extent (65 535).
  static constexpr index_t blocks_wanted = 2048;
  /// Columns a block: a warp's lanes, neighbouring outputs.
  static constexpr int columns_a_block = 32;
  static constexpr int row_lanes = block / columns_a_block;

  index_t rows, count;  // count == 1: not cut

  column_chunks(index_t length, index_t outputs) : rows(length), count(1) {
    const index_t blocks = column_blocks(outputs);
    if (length < cut_from || blocks >= blocks_wanted) return;
    const index_t wanted = blocks_wanted / blocks;
    rows = std::max(rows_at_least, (length + wanted - 1) / wanted);
    count = (length + rows - 1) / rows;
  }
  bool cut() const { return count > 1; }
  /// Blocks along the outputs.
  static index_t column_blocks(index_t outputs) { return (outputs + columns_a_block - 1) / columns_a_block; }
};

/// One chunk of `rows` rows of 32 neighbouring columns a block (blockIdx.x the columns,
/// blockIdx.y the chunk): the block's 8 warps read rows r, r + 8, ..., each warp 32 columns of a
/// row, and row lane 0 combines the 8 in order into out[chunk, output]. The same kernel then
/// combines each column's chunks, [chunks, outputs] as one chunk of `chunks` rows, and with
/// Finish divides a mean by the whole length (`finished_length`) and rounds to Out.
template <class Op, class In, class Out, bool Finish>
__global__ void __launch_bounds__(block)
    column_chunks_kernel(const In* __restrict__ in, Out* __restrict__ out, index_t outputs, index_t length,
                         index_t inner, index_t rows, index_t finished_length) {
  using T = accumulate_t<In>;
  constexpr int lanes = column_chunks::columns_a_block, row_lanes = column_chunks::row_lanes;
  __shared__ T by_row_lane[row_lanes][lanes];
  const int lane = static_cast<int>(threadIdx.x) % lanes, row_lane = static_cast<int>(threadIdx.x) / lanes;
  const index_t i = static_cast<index_t>(blockIdx.x) * lanes + lane;
  const index_t first = static_cast<index_t>(blockIdx.y) * rows;
  const index_t end = first + rows < length ? first + rows : length;
  T accumulated = Op::template identity<T>();
  if (i < outputs) {
    const index_t o = i / inner;
    const In* source = in + o * length * inner + (i - o * inner);
    for (index_t j = first + row_lane; j < end; j += row_lanes) accumulated = Op{}(accumulated, T(source[j * inner]));
  }
  by_row_lane[row_lane][lane] = accumulated;
  __syncthreads();
  if (row_lane == 0 && i < outputs) {
    T total = by_row_lane[0][lane];
#pragma unroll
    for (int r = 1; r < row_lanes; ++r) total = Op{}(total, by_row_lane[r][lane]);
    if constexpr (Finish) total = finish<Op>(total, finished_length);
    out[static_cast<index_t>(blockIdx.y) * outputs + i] = static_cast<Out>(total);
  }
}

}  // namespace attn::cuda_backend::reduce_kernels
