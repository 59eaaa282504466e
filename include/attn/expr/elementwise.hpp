// Elementwise nodes: unary and binary functions, scalar operands, comparisons and select.
// Operands must have the same shape (same dimensions, same order); broadcast is explicit.
// Over 16-bit storage types (bfloat16, float16) every node computes in accumulate_t (float):
// backends widen a leaf as they read it and round once, where the result is stored; scalar
// operands are constants of that compute type, as PyTorch's "opmath" scalars are.
#pragma once

#include <concepts>
#include <string_view>
#include <type_traits>

#include "expression.hpp"
#include "ops.hpp"

namespace attn {

namespace detail {
/// The shape rule of every elementwise operation, in one place so every message is the same.
template <class SA, class SB, class TA, class TB, class DA, class DB>
constexpr void check_elementwise() {
  static_assert(std::is_same_v<SA, SB>,
                "attn::elementwise: operand shapes differ (broadcast or permute explicitly)");
  static_assert(std::is_same_v<TA, TB>, "attn::elementwise: operand value types differ");
  static_assert(std::is_same_v<DA, DB>, "attn::elementwise: operands live on different devices");
}
}  // namespace detail

namespace expr {

/// Op applied to every element of A.
template <class Op, expression A>
struct unary {
  using value_type = decltype(Op{}(std::declval<typename A::value_type>()));
  using shape_type = typename A::shape_type;
  using device_type = typename A::device_type;

  Op op;
  A a;

  const attn::extents<shape_type>& extents() const { return a.extents(); }
  template <class F>
  void for_each_child(F&& f) const { f(a); }
};

/// Op applied to matching elements of A and B.
template <class Op, expression A, expression B>
struct binary {
  // From A alone, so that mixed value types reach the readable check in the constructor.
  using value_type =
      decltype(Op{}(std::declval<typename A::value_type>(), std::declval<typename A::value_type>()));
  using shape_type = typename A::shape_type;
  using device_type = typename A::device_type;

  Op op;
  A a;
  B b;

  binary(Op op_, A a_, B b_) : op(op_), a(a_), b(b_) {
    detail::check_elementwise<typename A::shape_type, typename B::shape_type,
                              typename A::value_type, typename B::value_type,
                              typename A::device_type, typename B::device_type>();
    check_common_extents("attn::elementwise", a.extents(), b.extents());
  }
  const attn::extents<shape_type>& extents() const { return a.extents(); }
  template <class F>
  void for_each_child(F&& f) const { f(a), f(b); }
};

/// One value at every position of a shape: how scalar operands enter expressions. The value
/// is kept in the compute type (float for 16-bit T): a constant is not storage.
template <class T, shape_type S, device Device>
struct constant {
  using value_type = T;
  using shape_type = S;
  using device_type = Device;

  accumulate_t<T> value;
  attn::extents<S> sizes;

  const attn::extents<S>& extents() const { return sizes; }
  template <class F>
  void for_each_child(F&&) const {}
};

/// Where Condition holds, A's element, else B's.
template <expression Condition, expression A, expression B>
struct select {
  using value_type = typename A::value_type;
  using shape_type = typename A::shape_type;
  using device_type = typename A::device_type;

  Condition condition;
  A a;
  B b;

  select(Condition c, A a_, B b_) : condition(c), a(a_), b(b_) {
    static_assert(std::is_same_v<typename Condition::value_type, bool>,
                  "attn::select: the condition must be a bool expression (a comparison)");
    detail::check_elementwise<typename A::shape_type, typename B::shape_type,
                              typename A::value_type, typename B::value_type,
                              typename A::device_type, typename B::device_type>();
    detail::check_elementwise<typename Condition::shape_type, typename A::shape_type, bool, bool,
                              typename Condition::device_type, typename A::device_type>();
    check_common_extents("attn::select", condition.extents(), a.extents());
    check_common_extents("attn::select", a.extents(), b.extents());
  }
  const attn::extents<shape_type>& extents() const { return a.extents(); }
  template <class F>
  void for_each_child(F&& f) const { f(condition), f(a), f(b); }
};

}  // namespace expr

/// What may stand beside an expression as a scalar operand: a number or a 16-bit float.
template <class S>
concept scalar = element<std::remove_cvref_t<S>>;

/// A scalar operand takes the shape, device and value type of the expression beside it.
template <class Like, class Scalar>
  requires expression<Like> && scalar<Scalar>
auto constant_like(const Like& like, Scalar value) {
  using T = typename Like::value_type;
  return expr::constant<T, typename Like::shape_type, typename Like::device_type>{
      static_cast<accumulate_t<T>>(value), like.extents()};
}

/// A tensor filled with one value, for shapes built at run time.
template <element T, device Device = cpu, shape_type S>
auto fill(const extents<S>& sizes, T value) {
  return expr::constant<T, S, Device>{static_cast<accumulate_t<T>>(value), sizes};
}

template <class Op, operand A>
auto map(Op op, A&& a) {
  return expr::unary<Op, operand_t<A>>{op, as_operand(std::forward<A>(a))};
}

template <class Op, operand A, operand B>
auto zip(Op op, A&& a, B&& b) {
  return expr::binary<Op, operand_t<A>, operand_t<B>>(op, as_operand(std::forward<A>(a)),
                                                       as_operand(std::forward<B>(b)));
}

#define ATTN_UNARY_FUNCTION(name)              \
  template <operand A>                         \
  auto name(A&& a) {                           \
    return map(op::name{}, std::forward<A>(a)); \
  }
ATTN_UNARY_FUNCTION(exp)
ATTN_UNARY_FUNCTION(log)
ATTN_UNARY_FUNCTION(sqrt)
ATTN_UNARY_FUNCTION(rsqrt)
ATTN_UNARY_FUNCTION(tanh)
ATTN_UNARY_FUNCTION(abs)
ATTN_UNARY_FUNCTION(relu)
#undef ATTN_UNARY_FUNCTION

template <operand A>
auto operator-(A&& a) {
  return map(op::negate{}, std::forward<A>(a));
}

/// Converts the value type: `cast<float>(mask)`.
template <element To, operand A>
auto cast(A&& a) {
  return map(op::cast<To>{}, std::forward<A>(a));
}

// Binary functions and operators, each with an expression or a scalar on either side.
#define ATTN_BINARY_FUNCTION(name, op_type)                                            \
  template <operand A, operand B>                                                      \
  auto name(A&& a, B&& b) {                                                            \
    return zip(op_type{}, std::forward<A>(a), std::forward<B>(b));                     \
  }                                                                                    \
  template <operand A, scalar Scalar>                                                  \
  auto name(A&& a, Scalar b) {                                                         \
    auto lhs = as_operand(std::forward<A>(a));                                         \
    return zip(op_type{}, lhs, constant_like(lhs, b));                                 \
  }                                                                                    \
  template <scalar Scalar, operand B>                                                  \
  auto name(Scalar a, B&& b) {                                                         \
    auto rhs = as_operand(std::forward<B>(b));                                         \
    return zip(op_type{}, constant_like(rhs, a), rhs);                                 \
  }
ATTN_BINARY_FUNCTION(operator+, op::add)
ATTN_BINARY_FUNCTION(operator-, op::subtract)
ATTN_BINARY_FUNCTION(operator*, op::multiply)
ATTN_BINARY_FUNCTION(operator/, op::divide)
ATTN_BINARY_FUNCTION(max, op::maximum)
ATTN_BINARY_FUNCTION(min, op::minimum)
ATTN_BINARY_FUNCTION(operator<, op::less)
ATTN_BINARY_FUNCTION(operator<=, op::less_equal)
ATTN_BINARY_FUNCTION(operator>, op::greater)
ATTN_BINARY_FUNCTION(operator>=, op::greater_equal)
ATTN_BINARY_FUNCTION(operator==, op::equal_to)
ATTN_BINARY_FUNCTION(operator!=, op::not_equal_to)
#undef ATTN_BINARY_FUNCTION

/// Where `condition` holds, `a`, else `b`; either branch may be a scalar.
template <operand C, class A, class B>
  requires(operand<A> || scalar<A>) && (operand<B> || scalar<B>)
auto where(C&& condition, A&& a, B&& b) {
  auto c = as_operand(std::forward<C>(condition));
  auto branch = [&]<class X, class Other>(X&& x, Other&&) {
    if constexpr (operand<X>) {
      return as_operand(std::forward<X>(x));
    } else if constexpr (operand<Other>) {
      using T = value_t<Other>;
      return expr::constant<T, shape_t<Other>, device_t<Other>>{static_cast<accumulate_t<T>>(x), c.extents()};
    } else {
      using T = std::remove_cvref_t<X>;
      return expr::constant<T, shape_t<C>, device_t<C>>{static_cast<accumulate_t<T>>(x), c.extents()};
    }
  };
  auto then_ = branch(std::forward<A>(a), b);
  auto else_ = branch(std::forward<B>(b), a);
  return expr::select<decltype(c), decltype(then_), decltype(else_)>(c, then_, else_);
}

}  // namespace attn
