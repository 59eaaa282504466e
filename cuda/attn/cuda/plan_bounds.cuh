// Bounds of a coordinate plan (coordinate_plan.cuh) over a box of coordinates: expr/bounds.hpp's
// interval arithmetic, node for node as bounds_over walks the expression, with the same rules
// for each operation (shared, device code), so that a GPU's kernels find a mask rule's spans as
// the CPU's do (mask_rule.cuh). A box is its two corners: the maps of broadcasts, permutes and
// slices (pick, shift) keep the order of each coordinate, so they map the corners; a reshape's
// does not, and, like memory and a placeholder, gives no bounds. No CUDA run-time: the
// emulator's tests compile it too.
#pragma once

#include <cstddef>
#include <type_traits>

#include <attn/expr.hpp>

#include "coordinate_plan.cuh"

namespace attn::cuda_backend {

namespace detail {

template <class P>
inline constexpr bool is_iota_plan = false;
template <class T>
inline constexpr bool is_iota_plan<iota_at<T>> = true;

template <class P>
inline constexpr bool is_constant_plan = false;
template <class T>
inline constexpr bool is_constant_plan<constant_plan<T>> = true;

/// A map that keeps the order of each coordinate (a broadcast's or a permute's pick, a slice's
/// shift): it maps a box's corners to its operand's box's. A reshape's relayout does not.
template <class Map>
inline constexpr bool keeps_order = false;
template <std::size_t... From>
inline constexpr bool keeps_order<pick<From...>> = true;
template <std::size_t Dim>
inline constexpr bool keeps_order<shift<Dim>> = true;

template <class P>
struct plan_parts {
  static constexpr bool mapped = false, unary = false, binary = false, select = false;
};
template <class Map, class A>
struct plan_parts<mapped_at<Map, A>> {
  static constexpr bool mapped = true, unary = false, binary = false, select = false;
  static constexpr bool keeps_order = detail::keeps_order<Map>;
};
template <class Op, class A>
struct plan_parts<unary_plan<Op, A>> {
  static constexpr bool mapped = false, unary = true, binary = false, select = false;
  using op = Op;
};
template <class Op, class A, class B>
struct plan_parts<binary_plan<Op, A, B>> {
  static constexpr bool mapped = false, unary = false, binary = true, select = false;
  using op = Op;
};
template <class C, class A, class B>
struct plan_parts<select_plan<C, A, B>> {
  static constexpr bool mapped = false, unary = false, binary = false, select = true;
};

}  // namespace detail

/// Bounds of plan p over the box [lo, hi] of its coordinates; unknown where it cannot keep them.
template <class Plan, std::size_t R, class I>
__device__ value_bounds<typename Plan::value_type> plan_bounds(const Plan& p, const position<R, I>& lo,
                                                               const position<R, I>& hi) {
  using T = typename Plan::value_type;
  using parts = detail::plan_parts<Plan>;
  if constexpr (detail::is_iota_plan<Plan>) {
    return attn::detail::bounded<T>(p.start + static_cast<T>(lo.index[0]), p.start + static_cast<T>(hi.index[0]));
  } else if constexpr (detail::is_constant_plan<Plan>) {
    return attn::detail::bounded<T>(p.value, p.value);
  } else if constexpr (parts::mapped) {
    if constexpr (parts::keeps_order) return plan_bounds(p.a, p.map(lo), p.map(hi));
    else return {};
  } else if constexpr (parts::unary) {
    return attn::detail::unary_bounds<T>(typename parts::op{}, plan_bounds(p.a, lo, hi));
  } else if constexpr (parts::binary) {
    return attn::detail::binary_bounds(typename parts::op{}, plan_bounds(p.a, lo, hi), plan_bounds(p.b, lo, hi));
  } else if constexpr (parts::select) {
    const auto condition = plan_bounds(p.condition, lo, hi);
    if (condition.known && condition.lo) return plan_bounds(p.a, lo, hi);
    if (condition.known && !condition.hi) return plan_bounds(p.b, lo, hi);
    const auto x = plan_bounds(p.a, lo, hi), y = plan_bounds(p.b, lo, hi);
    if (!x.known || !y.known) return {};
    return {attn::detail::smaller(x.lo, y.lo), attn::detail::larger(x.hi, y.hi), true};
  } else {
    return {};  // memory, a placeholder
  }
}

}  // namespace attn::cuda_backend
