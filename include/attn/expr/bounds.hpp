// Bounds of an elementwise expression over a box of coordinates, by interval arithmetic: what
// lets a fused attention kernel tell from a mask rule's expression (grad::pair_rule) that it
// hides, or allows, a whole tile of pairs without asking each pair. Conservative: every element
// in the box lies within the bounds. Each bound is computed by the element's own operation, in
// the type element_at computes it (expr/element.hpp), on the operands' bounds; the operations
// kept are those whose rounded result never moves against its exact one (+, −, ·, negation,
// |x|, max, min, relu, sqrt, comparisons, a select, a cast from one floating type to another),
// so that the rounded element stays between the rounded bounds. A product's bounds are widened
// by a unit in the last place each way: they hold the exact product, so that a compiler that
// fuses it into the addition after it (a GPU's fma, which nvcc makes by default) still lands
// inside. Anything else (exp, tanh, a division, memory, a placeholder, a reshape that moves
// coordinates, integer arithmetic, which wraps, a value that is not finite) gives no bounds:
// `known` false. The operations' rules are device code too: a GPU's kernels take a rule's spans
// from the same rules over the expression's coordinate plan (cuda/attn/cuda/plan_bounds.cuh).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "../core/config.hpp"
#include "broadcast.hpp"
#include "elementwise.hpp"
#include "iota.hpp"
#include "layout.hpp"
#include "ops.hpp"
#include "slice.hpp"

namespace attn {

/// Closed bounds [lo, hi] on every value of an expression in a box, when `known`. For a bool
/// expression, lo true: true everywhere; hi false: false everywhere.
template <class T>
struct value_bounds {
  T lo{}, hi{};
  bool known = false;
};

/// A box of coordinates of a rank-R shape: [lo[r], hi[r]] along dimension r.
template <std::size_t R>
struct coordinate_box {
  index_t lo[R > 0 ? R : 1], hi[R > 0 ? R : 1];
};

namespace detail {

/// Finite, and of a type whose arithmetic keeps the order: a floating type (integers wrap), or
/// a bool.
template <class T>
ATTN_HOST_DEVICE constexpr bool is_ordered_value(T x) {
  if constexpr (std::is_floating_point_v<T>) return x - x == T(0);  // false for ±∞ and NaN
  else return std::is_same_v<T, bool>;
}

template <class T>
ATTN_HOST_DEVICE constexpr value_bounds<T> bounded(T lo, T hi) {
  return {lo, hi, is_ordered_value(lo) && is_ordered_value(hi)};
}

/// The bounds a unit in the last place wider each way.
template <class T>
ATTN_HOST_DEVICE value_bounds<T> widened(value_bounds<T> b) {
  using std::nextafter;
  constexpr T infinity = std::numeric_limits<T>::infinity();
  if (b.known) b = bounded(nextafter(b.lo, -infinity), nextafter(b.hi, infinity));
  return b;
}

template <class T>
ATTN_HOST_DEVICE constexpr T smaller(T a, T b) {
  return b < a ? b : a;
}
template <class T>
ATTN_HOST_DEVICE constexpr T larger(T a, T b) {
  return a < b ? b : a;
}

/// Bounds of op(a) for a in [a.lo, a.hi], in R.
template <class R, class Op, class T>
ATTN_HOST_DEVICE value_bounds<R> unary_bounds(const Op& op, const value_bounds<T>& a) {
  if (!a.known) return {};
  if constexpr (std::is_same_v<Op, op::negate>) {
    return bounded<R>(-a.hi, -a.lo);
  } else if constexpr (std::is_same_v<Op, op::abs>) {
    if (a.lo >= T(0)) return bounded<R>(a.lo, a.hi);
    if (a.hi <= T(0)) return bounded<R>(-a.hi, -a.lo);
    return bounded<R>(T(0), larger(-a.lo, a.hi));
  } else if constexpr (std::is_same_v<Op, op::relu>) {
    return bounded<R>(op(a.lo), op(a.hi));
  } else if constexpr (std::is_same_v<Op, op::sqrt>) {
    return a.lo < T(0) ? value_bounds<R>{} : bounded<R>(op(a.lo), op(a.hi));
  } else {
    return value_bounds<R>{};
  }
}
template <class R, class To, class T>
ATTN_HOST_DEVICE value_bounds<R> unary_bounds(const op::cast<To>& op, const value_bounds<T>& a) {
  // Rounding to a floating type keeps the order; to an integer or a bool it does not bound.
  if (!a.known || !std::is_floating_point_v<R> || !std::is_floating_point_v<T>) return {};
  return bounded<R>(R(op(a.lo)), R(op(a.hi)));
}

/// Bounds of a op b, or of the comparison a op b (a bool).
template <class Op, class T>
ATTN_HOST_DEVICE auto binary_bounds(const Op& op, const value_bounds<T>& a, const value_bounds<T>& b) {
  using R = decltype(op(a.lo, b.lo));
  if (!a.known || !b.known) return value_bounds<R>{};
  if constexpr (std::is_same_v<R, bool> && (std::is_same_v<Op, op::minimum> || std::is_same_v<Op, op::maximum>)) {
    return bounded<R>(op(a.lo, b.lo), op(a.hi, b.hi));  // "and" and "or" of two bools
  } else if constexpr (std::is_same_v<R, bool>) {
    // A comparison: true everywhere, false everywhere, or either.
    bool always = false, never = false;
    if constexpr (std::is_same_v<Op, op::less>) always = a.hi < b.lo, never = a.lo >= b.hi;
    else if constexpr (std::is_same_v<Op, op::less_equal>) always = a.hi <= b.lo, never = a.lo > b.hi;
    else if constexpr (std::is_same_v<Op, op::greater>) always = a.lo > b.hi, never = a.hi <= b.lo;
    else if constexpr (std::is_same_v<Op, op::greater_equal>) always = a.lo >= b.hi, never = a.hi < b.lo;
    else if constexpr (std::is_same_v<Op, op::equal_to> || std::is_same_v<Op, op::not_equal_to>) {
      const bool equal = a.lo == a.hi && b.lo == b.hi && a.lo == b.lo, apart = a.hi < b.lo || b.hi < a.lo;
      always = std::is_same_v<Op, op::equal_to> ? equal : apart;
      never = std::is_same_v<Op, op::equal_to> ? apart : equal;
    } else {
      return value_bounds<R>{};
    }
    return value_bounds<R>{!never && always, !never, true};
  } else if constexpr (std::is_same_v<Op, op::add>) {
    return bounded<R>(op(a.lo, b.lo), op(a.hi, b.hi));
  } else if constexpr (std::is_same_v<Op, op::subtract>) {
    return bounded<R>(op(a.lo, b.hi), op(a.hi, b.lo));
  } else if constexpr (std::is_same_v<Op, op::multiply>) {
    const R p[] = {op(a.lo, b.lo), op(a.lo, b.hi), op(a.hi, b.lo), op(a.hi, b.hi)};
    return widened(bounded<R>(smaller(smaller(p[0], p[1]), smaller(p[2], p[3])),
                              larger(larger(p[0], p[1]), larger(p[2], p[3]))));
  } else if constexpr (std::is_same_v<Op, op::maximum> || std::is_same_v<Op, op::minimum>) {
    return bounded<R>(op(a.lo, b.lo), op(a.hi, b.hi));
  } else {
    return value_bounds<R>{};
  }
}

template <class E>
inline constexpr bool is_reshape_node = false;
template <class To, class A>
inline constexpr bool is_reshape_node<expr::reshape<To, A>> = true;

}  // namespace detail

/// Bounds of elementwise expression e over the box b of its coordinates (see the top of this
/// file); unknown where it cannot keep them.
template <expression E>
value_bounds<accumulate_t<value_t<E>>> bounds_over(const E& e, const coordinate_box<shape_t<E>::rank>& b) {
  using R = accumulate_t<value_t<E>>;
  using S = shape_t<E>;
  if constexpr (is_tensor_view_v<E> || requires { typename E::contracted_dim; } ||
                requires { typename E::reduced_dim; }) {
    return {};  // memory, or not an element of its own
  } else if constexpr (requires { e.condition; }) {
    const auto condition = bounds_over(e.condition, b);
    if (condition.known && condition.lo) return bounds_over(e.a, b);
    if (condition.known && !condition.hi) return bounds_over(e.b, b);
    const auto x = bounds_over(e.a, b), y = bounds_over(e.b, b);
    if (!x.known || !y.known) return {};
    return {detail::smaller(x.lo, y.lo), detail::larger(x.hi, y.hi), true};
  } else if constexpr (requires { e.a; e.b; }) {
    return detail::binary_bounds(e.op, bounds_over(e.a, b), bounds_over(e.b, b));
  } else if constexpr (requires { e.op; e.a; }) {
    return detail::unary_bounds<R>(e.op, bounds_over(e.a, b));
  } else if constexpr (requires { e.a; }) {
    using A = std::remove_cvref_t<decltype(e.a)>;
    using SA = shape_t<A>;
    coordinate_box<SA::rank> in{};
    if constexpr (requires { e.start; }) {  // slice: one dimension shifted
      in = b;
      in.lo[dim_index<S, typename E::sliced_dim>] += e.start;
      in.hi[dim_index<S, typename E::sliced_dim>] += e.start;
    } else if constexpr (std::is_same_v<SA, S> && !detail::is_reshape_node<E>) {
      in = b;  // input<I>
    } else if constexpr (detail::is_reshape_node<E> && SA::rank == S::rank) {
      // A rename, or a reshape that keeps its sizes: the same coordinates (element_at's
      // pass-through, and the GPU's plan's).
      for (std::size_t r = 0; r < S::rank; ++r)
        if (e.extents()[r] != e.a.extents()[r]) return {};
      in = b;
    } else if constexpr (requires { E::source_positions(); }) {  // permute
      constexpr auto from = E::source_positions();
      for (std::size_t r = 0; r < S::rank; ++r) in.lo[from[r]] = b.lo[r], in.hi[from[r]] = b.hi[r];
    } else if constexpr (std::is_same_v<E, expr::broadcast<S, A>>) {  // A's dimensions keep their ranges
      [&]<class... Ds>(meta::list<Ds...>) {
        std::size_t r = 0;
        ((in.lo[r] = b.lo[dim_index<S, Ds>], in.hi[r++] = b.hi[dim_index<S, Ds>]), ...);
      }(typename SA::dims{});
    } else {
      return {};  // a split or a merge: a box of its coordinates is no box of its operand's
    }
    return bounds_over(e.a, in);
  } else if constexpr (requires { e.value; }) {
    return detail::bounded<R>(R(e.value), R(e.value));  // a constant
  } else if constexpr (requires { e.start; }) {
    return detail::bounded<R>(e.start + R(b.lo[0]), e.start + R(b.hi[0]));  // an iota
  } else {
    return {};  // a placeholder
  }
}

}  // namespace attn
