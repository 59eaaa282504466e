// Reductions on the CPU: one Eigen reduction over the named axis, threads sharing the outputs.
#pragma once

#include "evaluate.hpp"
#include "lowering.hpp"

namespace attn::cpu_backend {

template <class T, class S, class E>
void reduce_into(const tensor_view<T, S, cpu>& dst, const E& reduction) {
  using source_shape = typename decltype(reduction.a)::shape_type;
  using D = typename E::reduced_dim;
  using Op = typename E::op_type;
  lowering<decltype(reduction.a)> source(reduction.a);  // in accumulate_t: float for 16-bit operands
  eigen_map_mut<T, S::rank> out(dst.data(), eigen_sizes(dst.extents()));
  // A compile-time axis: Eigen picks its vectorised inner- and outer-dimension reducers only
  // when it can see which dimension is reduced.
  const Eigen::IndexList<Eigen::type2index<static_cast<Eigen::Index>(dim_index<source_shape, D>)>> axis;
  const index_t reads = reduction.a.extents().template extent<D>();
  if constexpr (std::is_same_v<Op, op::sum>) run_assign(out, stored_as<T>(source.eigen().sum(axis)), reads);
  else if constexpr (std::is_same_v<Op, op::max>) run_assign(out, stored_as<T>(source.eigen().maximum(axis)), reads);
  else if constexpr (std::is_same_v<Op, op::mean>) run_assign(out, stored_as<T>(source.eigen().mean(axis)), reads);
  else static_assert(sizeof(Op) == 0, "attn::cpu: no lowering for this reduction");
}

}  // namespace attn::cpu_backend
