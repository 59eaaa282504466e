// One element's coordinates, which the fused attention kernels hold for each score (b, h, i, j)
// and a score modification's plans (coordinate_plan.cuh) map from node to node, and the
// row-major offset they make in a shape. No CUDA run-time: the emulator's tests compile it too.
#pragma once

#include <cstddef>

#include <attn/core.hpp>

namespace attn::cuda_backend {

/// Coordinates of one element of a rank-R shape, outermost first, as integers I.
template <std::size_t R, class I>
struct position {
  I index[R > 0 ? R : 1];
};

/// The row-major offset of coordinates c in a shape with these strides.
template <std::size_t R, class I>
__host__ __device__ I offset_at(const position<R, I>& c, const index_t (&strides)[R > 0 ? R : 1]) {
  I offset = 0;
  for (std::size_t r = 0; r < R; ++r) offset += c.index[r] * I(strides[r]);
  return offset;
}

}  // namespace attn::cuda_backend
