// The parts of Eigen the CPU backend lowers to, and conversions from attn's extents.
#pragma once

#include <Eigen/Core>
#include <unsupported/Eigen/CXX11/Tensor>

#include "../core/extents.hpp"

namespace attn::cpu_backend {

/// A read-only Eigen view of rank R over contiguous row-major elements.
template <class T, std::size_t R>
using eigen_map = Eigen::TensorMap<const Eigen::Tensor<T, static_cast<int>(R), Eigen::RowMajor, Eigen::Index>>;

/// A writable one.
template <class T, std::size_t R>
using eigen_map_mut = Eigen::TensorMap<Eigen::Tensor<T, static_cast<int>(R), Eigen::RowMajor, Eigen::Index>>;

template <class S>
Eigen::DSizes<Eigen::Index, static_cast<int>(S::rank)> eigen_sizes(const extents<S>& sizes) {
  Eigen::DSizes<Eigen::Index, static_cast<int>(S::rank)> out;
  for (std::size_t i = 0; i < S::rank; ++i) out[static_cast<int>(i)] = sizes[i];
  return out;
}

}  // namespace attn::cpu_backend
