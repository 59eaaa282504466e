// Runs one Eigen assignment `dst = expression` as a single fused pass, split across threads.
#pragma once

#include "eigen.hpp"
#include "threads.hpp"

namespace attn::cpu_backend {

/// Evaluates an Eigen tensor expression into `dst`: every element computed once, by Eigen's
/// own executor (vectorised, and tiled where the expression reads out of order, as permutes
/// and broadcasts do), each thread on a contiguous range of the outermost dimension that has
/// enough positions to share.
template <class Dst, class Src>
void run_assign(Dst& dst, const Src& source) {
  constexpr int rank = Dst::NumDimensions;
  // Below ~32k elements a fork-join costs more than it saves.
  const index_t threads = std::min<index_t>(max_threads(), dst.size() >> 15);
  int axis = -1;
  if constexpr (rank > 0) {
    for (int d = 0; d < rank && threads > 1; ++d) {
      if (dst.dimension(d) >= threads) {
        axis = d;
        break;
      }
    }
  }
  if (axis < 0) {
    dst = source;
    return;
  }
  if constexpr (rank > 0) {
    parallel_for(dst.dimension(axis), 1, (dst.dimension(axis) + threads - 1) / threads,
                 [&](index_t begin, index_t end) {
                   Eigen::DSizes<Eigen::Index, rank> offsets;
                   Eigen::DSizes<Eigen::Index, rank> sizes = dst.dimensions();
                   for (int d = 0; d < rank; ++d) offsets[d] = 0;
                   offsets[axis] = begin;
                   sizes[axis] = end - begin;
                   dst.slice(offsets, sizes) = source.slice(offsets, sizes);
                 });
  }
}

}  // namespace attn::cpu_backend
