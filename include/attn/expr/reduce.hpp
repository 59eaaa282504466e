// Reductions over one named dimension: sum, max, mean. The dimension leaves the shape.
#pragma once

#include <utility>

#include "expression.hpp"
#include "ops.hpp"

namespace attn {

namespace expr {

/// A reduced with Op over dimension D.
template <class Op, dimension D, expression A>
struct reduce {
  using value_type = typename A::value_type;
  using shape_type = remove_dim<typename A::shape_type, D>;
  using device_type = typename A::device_type;
  using reduced_dim = D;
  using op_type = Op;

  A a;
  attn::extents<shape_type> sizes;

  explicit reduce(A a_) : a(a_), sizes(gather_extents<shape_type>(a.extents())) {}
  const attn::extents<shape_type>& extents() const { return sizes; }
  template <class F>
  void for_each_child(F&& f) const { f(a); }
};

}  // namespace expr

namespace detail {
template <class Op, class D, class A>
auto make_reduce(A&& a) {
  static_assert(has_dim<shape_t<A>, D>, "attn::reduce: the reduced dimension is not in the shape");
  return expr::reduce<Op, D, operand_t<A>>(as_operand(std::forward<A>(a)));
}
}  // namespace detail

/// Sum over dimension D: `sum<src>(weights)`.
template <dimension D, operand A>
auto sum(A&& a) {
  return detail::make_reduce<op::sum, D>(std::forward<A>(a));
}

/// Largest element along dimension D.
template <dimension D, operand A>
auto max(A&& a) {
  return detail::make_reduce<op::max, D>(std::forward<A>(a));
}

/// Mean along dimension D.
template <dimension D, operand A>
auto mean(A&& a) {
  return detail::make_reduce<op::mean, D>(std::forward<A>(a));
}

}  // namespace attn
