// Maps from an elementwise node's row-major linear index to its operand's: index_map for
// broadcasts and permutes, slice_map for slices. Built on the host, evaluated by the generated
// kernels (elementwise.cuh) and by fused attention's score modifications at every element; with
// 32-bit indices they divide by multiplying (fast_divider.cuh). No CUDA run-time here: the CPU
// emulator's tests compile them too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <attn/core.hpp>

#include "fast_divider.cuh"

namespace attn::cuda_backend {

namespace detail {

/// Row-major strides, in elements, of every dimension of S.
template <class S>
std::array<index_t, S::rank> row_major_strides(const extents<S>& sizes) {
  std::array<index_t, S::rank> strides{};
  index_t stride = 1;
  for (std::size_t i = S::rank; i-- > 0;) {
    strides[i] = stride;
    stride *= sizes[i];
  }
  return strides;
}

}  // namespace detail

/// A map from a node's row-major linear index to its operand's: the coordinate along each
/// dimension times the operand's stride for it. Built on the host with size-1 dimensions
/// dropped and adjacent dimensions that stay adjacent in the operand merged, so that a
/// broadcast over [batch, heads, len, len] usually costs one or two divisions, not three.
template <std::size_t R>
struct index_map {
  static constexpr std::size_t capacity = R > 0 ? R : 1;
  int rank = 0;  // after merging; dimension 0 is the outermost
  index_t sizes[capacity] = {};
  index_t strides[capacity] = {};
  fast_divider dividers[capacity] = {};  // by sizes[r], for 32-bit indices

  /// Dimensions outermost first: their sizes in the node, their strides in the operand.
  static index_map make(const std::array<index_t, R>& node_sizes,
                        const std::array<index_t, R>& operand_strides) {
    index_map m;
    for (std::size_t r = 0; r < R; ++r) {
      if (node_sizes[r] == 1) continue;  // its coordinate is always 0
      if (m.rank > 0 && m.strides[m.rank - 1] == operand_strides[r] * node_sizes[r]) {
        m.sizes[m.rank - 1] *= node_sizes[r];
        m.strides[m.rank - 1] = operand_strides[r];
      } else {
        m.sizes[m.rank] = node_sizes[r];
        m.strides[m.rank] = operand_strides[r];
        ++m.rank;
      }
    }
    for (int r = 0; r < m.rank; ++r)  // 32-bit kernels divide by multiplying (64-bit ones by sizes)
      if (m.sizes[r] >= 1 && m.sizes[r] <= index_t{0xffffffff}) m.dividers[r] = fast_divider(std::uint64_t(m.sizes[r]));
    return m;
  }

  /// The operand's stride along the innermost dimension, 0 with none (elementwise_vectors.cuh
  /// reads runs along it). A search over a constant count, which nvcc unrolls, so that the
  /// device indexes the array with constants (no `#pragma unroll`: the host compiles it too).
  __host__ __device__ index_t inner_stride() const {
    index_t stride = 0;
    for (int j = 0; j < static_cast<int>(capacity); ++j)
      if (j == rank - 1) stride = strides[j];
    return stride;
  }

  /// The dimensions innermost first, each array indexed by a constant once the loop is
  /// unrolled: indexed by `rank - 1 - j`, nvcc copied the whole plan to the stack and read the
  /// map from there (a 128-byte frame and a local load a size, stride and divider, element after
  /// element, in the kernel of a bf16 permute; docs/benchmarks.md).
  template <class I>
  __device__ I operator()(I i) const {
    I offset = 0;
#pragma unroll
    for (int r = static_cast<int>(capacity) - 1; r >= 0; --r) {
      if (r >= rank) continue;  // no such dimension
      if (r > 0) {
        if constexpr (sizeof(I) == 4) {
          const I quotient = dividers[r].quotient(i);
          offset += dividers[r].remainder(i, quotient) * static_cast<I>(strides[r]);
          i = quotient;
        } else {
          const I size = static_cast<I>(sizes[r]);
          offset += (i % size) * static_cast<I>(strides[r]);
          i /= size;
        }
      } else if (r == 0) {
        offset += i * static_cast<I>(strides[0]);  // i < sizes[0]: no modulo needed
      }
    }
    return offset;
  }
};

/// With inner = the product of the sizes after the sliced dimension, a slice is
/// [outer, count * inner] and its operand [outer, extent * inner]: one division finds the
/// row, and the column shifts by start * inner.
struct slice_map {
  index_t block;         // count * inner
  index_t source_block;  // extent * inner
  index_t offset;        // start * inner
  fast_divider by_block;  // for 32-bit indices
  template <class I>
  __device__ I operator()(I i) const {
    I row;
    if constexpr (sizeof(I) == 4) row = by_block.quotient(i);
    else row = i / static_cast<I>(block);
    return row * static_cast<I>(source_block) + static_cast<I>(offset) + (i - row * static_cast<I>(block));
  }
};

}  // namespace attn::cuda_backend
