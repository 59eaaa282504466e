// Reductions on the CPU: one Eigen reduction over the named axis, threads sharing the outputs;
// sums over the leading axis of stored numbers (a bias's gradient: Σ over rows of dy) as rows
// added in order; 16-bit results reduced in float and rounded over the array.
#pragma once

#include <algorithm>
#include <limits>
#include <type_traits>

#include "../expr/layout.hpp"
#include "conversions.hpp"
#include "evaluate.hpp"
#include "lowering.hpp"
#include "threads.hpp"

namespace attn::cpu_backend {

namespace detail {

/// out[j] = Σ_r x[r, j] for x [rows, columns]: each thread a range of columns, rows added in
/// order (the same sums for any thread count). Eigen's reducer for the outer axis of a row-major
/// tensor reads it with a stride; this reads it as stored.
template <class T>
void sum_leading_axis(T* out, const T* x, index_t rows, index_t columns) {
  constexpr index_t columns_a_piece = 64;  // a cache line or four: no two threads write one
  // At least ~32k numbers read a thread: below that a fork-join costs more than it saves.
  const index_t columns_a_thread = std::max<index_t>(columns_a_piece, (index_t{1} << 15) / std::max<index_t>(1, rows));
  parallel_for(columns, columns_a_piece, columns_a_thread, [&](index_t begin, index_t end) {
    std::fill(out + begin, out + end, T(0));
    for (index_t r = 0; r < rows; ++r) {
      const T* row = x + r * columns;
      for (index_t j = begin; j < end; ++j) out[j] += row[j];
    }
  });
}

}  // namespace detail

template <class T, class S, class E>
void reduce_into(const tensor_view<T, S, cpu>& dst, const E& reduction) {
  using source_shape = typename decltype(reduction.a)::shape_type;
  using D = typename E::reduced_dim;
  using Op = typename E::op_type;
  using Source = decltype(reduction.a);
  using Stored = std::remove_const_t<typename Source::value_type>;
  if constexpr (is_float16_storage<T>) {
    // Reduced in float and rounded over the array: a cast to 16 bits at the end made Eigen's
    // reducer run an element at a time (a bias's gradient, 5 % of a bf16 training step).
    tensor<accumulate_t<T>, S, cpu> wide(dst.extents(), uninitialized);
    reduce_into(wide.view(), reduction);
    conversions::narrow(dst.data(), wide.data(), dst.size());
    return;
  } else if constexpr (std::is_same_v<Op, op::sum> && source_shape::rank >= 2 && dim_index<source_shape, D> == 0 &&
                       attn::detail::is_viewable<Source> &&
                       (std::is_same_v<Stored, T> || (is_float16_storage<Stored> && std::is_same_v<T, float>))) {
    const index_t rows = reduction.a.extents().template extent<D>();
    const auto x = attn::detail::as_view(reduction.a);
    if constexpr (std::is_same_v<Stored, T>) {
      detail::sum_leading_axis(dst.data(), x.data(), rows, dst.size());
    } else {
      const auto wide = conversions::widened(x.data(), x.size());  // the 16-bit rows in float
      detail::sum_leading_axis(dst.data(), wide.data(), rows, dst.size());
    }
    return;
  }
  if (reduction.a.extents().size() == 0) {
    // An operand with no elements (an empty batch), not lowered: Eigen's broadcast asserts on an
    // operand with no elements. Each output is the reduction's identity, as the GPU's kernels
    // write it: 0 for a sum, -inf for a maximum, and 0 / 0 for a mean (NaN; 0 for integers).
    using C = accumulate_t<Stored>;
    C nothing = Op::template identity<C>();
    if constexpr (std::is_same_v<Op, op::mean> && std::is_floating_point_v<C>)
      nothing = std::numeric_limits<C>::quiet_NaN();
    std::fill_n(dst.data(), dst.size(), static_cast<T>(nothing));
    return;
  }
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
