// One element's coordinates, which the fused attention kernels hold for each score (b, h, i, j)
// and a score modification's plans (coordinate_plan.cuh) map from node to node, and the
// row-major offset they make in a shape (offset_of). No CUDA run-time: the emulator's tests
// compile it too.
#pragma once

#include <cstddef>

#include <attn/core.hpp>

#include "index_map.cuh"  // row_major_strides

namespace attn::cuda_backend {

/// Coordinates of one element of a rank-R shape, outermost first, as integers I.
template <std::size_t R, class I>
struct position {
  I index[R > 0 ? R : 1];
};

/// The row-major offset of coordinates in a shape: a coordinate plan's leaf reads its data
/// there, an index plan ends there, at the input.
template <std::size_t R>
struct offset_of {
  using value_type = index_t;
  index_t strides[R > 0 ? R : 1];

  template <class S>
  static offset_of in(const extents<S>& sizes) {
    static_assert(S::rank == R);
    offset_of o{};
    const auto strides = detail::row_major_strides(sizes);
    for (std::size_t r = 0; r < R; ++r) o.strides[r] = strides[r];
    return o;
  }
  template <class I>
  __host__ __device__ I operator()(const position<R, I>& c) const {
    I offset = 0;
    for (std::size_t r = 0; r < R; ++r) offset += c.index[r] * I(strides[r]);
    return offset;
  }
};

}  // namespace attn::cuda_backend
