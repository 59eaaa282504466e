// The parts of Eigen the CPU backend lowers to, and conversions from attn's extents.
#pragma once

#include <Eigen/Core>
#include <unsupported/Eigen/CXX11/Tensor>

#include "../core/extents.hpp"
#include "../core/float16.hpp"

// attn's 16-bit storage types as Eigen scalars: maps over them are read through a cast to
// float and written through a cast back (lowering.hpp), so Eigen never computes in them.
namespace attn::cpu_backend::detail {
template <class T>
struct storage_num_traits : Eigen::GenericNumTraits<T> {
  enum { IsInteger = 0, IsSigned = 1, IsComplex = 0, RequireInitialization = 0, ReadCost = 1, AddCost = 1, MulCost = 1 };
  using Real = T;
  using NonInteger = T;
  using Literal = T;
};
}  // namespace attn::cpu_backend::detail

namespace Eigen {
template <>
struct NumTraits<attn::bfloat16> : attn::cpu_backend::detail::storage_num_traits<attn::bfloat16> {};
template <>
struct NumTraits<attn::float16> : attn::cpu_backend::detail::storage_num_traits<attn::float16> {};
}  // namespace Eigen

namespace attn::cpu_backend {

/// A read-only Eigen view of rank R over contiguous row-major elements.
template <class T, std::size_t R>
using eigen_map = Eigen::TensorMap<const Eigen::Tensor<T, static_cast<int>(R), Eigen::RowMajor, Eigen::Index>>;

/// A writable one.
template <class T, std::size_t R>
using eigen_map_mut = Eigen::TensorMap<Eigen::Tensor<T, static_cast<int>(R), Eigen::RowMajor, Eigen::Index>>;

/// The Eigen expression x of computed values, as stored in T: rounded once when T is a 16-bit
/// type (x computes in float), itself otherwise.
template <class T, class X>
auto stored_as(const X& x) {
  if constexpr (is_float16_storage<std::remove_const_t<T>>) return x.template cast<std::remove_const_t<T>>();
  else return x;
}

template <class S>
Eigen::DSizes<Eigen::Index, static_cast<int>(S::rank)> eigen_sizes(const extents<S>& sizes) {
  Eigen::DSizes<Eigen::Index, static_cast<int>(S::rank)> out;
  for (std::size_t i = 0; i < S::rank; ++i) out[static_cast<int>(i)] = sizes[i];
  return out;
}

}  // namespace attn::cpu_backend
