// Derivatives of elementwise expressions, read off the expressions themselves: each node's
// rule applied to its operands' derivatives (forward mode, done on types). An attention
// variant's score modification, written once as an expression, gets its backward pass from
// here (grad/map.hpp) instead of from a hand-written rule.
#pragma once

#include <cstddef>
#include <type_traits>

#include "broadcast.hpp"
#include "dropout_mask.hpp"
#include "elementwise.hpp"
#include "iota.hpp"
#include "layout.hpp"
#include "slice.hpp"

namespace attn {

namespace expr {

/// Input I of an expression: A itself, marked so that derivative<I> can tell it apart.
template <std::size_t I, expression A>
struct input {
  using value_type = typename A::value_type;
  using shape_type = typename A::shape_type;
  using device_type = typename A::device_type;

  A a;

  const attn::extents<shape_type>& extents() const { return a.extents(); }
  template <class F>
  void for_each_child(F&& f) const { f(a); }
};

/// The derivative of an expression that does not depend on the input: no term at all, so
/// that sums and products drop it before anything is built.
struct zero {};

}  // namespace expr

/// Marks `a` as input I.
template <std::size_t I, operand A>
auto input(A&& a) {
  return expr::input<I, operand_t<A>>{as_operand(std::forward<A>(a))};
}

namespace detail {

template <class X>
inline constexpr bool is_zero = std::is_same_v<std::remove_cvref_t<X>, expr::zero>;

// Sums and products that know zero.
template <class A, class B>
auto plus(const A& a, const B& b) {
  if constexpr (is_zero<A>) return b;
  else if constexpr (is_zero<B>) return a;
  else return a + b;
}
template <class A>
auto negated(const A& a) {
  if constexpr (is_zero<A>) return a;
  else return -a;
}
template <class A, class B>
auto minus(const A& a, const B& b) {
  return plus(a, negated(b));
}
/// d · f where d is a derivative (maybe zero) and f an expression.
template <class D, class F>
auto times(const D& d, const F& f) {
  if constexpr (is_zero<D>) return d;
  else return d * f;
}
/// Where c holds d, else e; zero where one is absent.
template <class C, class D, class E>
auto choose(const C& c, const D& d, const E& e) {
  if constexpr (is_zero<D> && is_zero<E>) return d;
  else if constexpr (is_zero<E>) return where(c, d, 0);
  else if constexpr (is_zero<D>) return where(c, 0, e);
  else return where(c, d, e);
}

/// derivative_rule<I, E>::of(e): ∂e/∂(input I), elementwise; see derivative() below.
template <std::size_t I, class E>
struct derivative_rule {
  static_assert(sizeof(E) == 0,
                "attn::derivative: the expression is not elementwise (a reduction or a contraction has no "
                "elementwise derivative); differentiate the elementwise part");
};

template <std::size_t I, class E>
auto derivative_of(const E& e) {
  return derivative_rule<I, E>::of(e);
}

template <std::size_t I, std::size_t J, class A>
struct derivative_rule<I, expr::input<J, A>> {
  static auto of(const expr::input<J, A>& e) {
    if constexpr (I == J) return constant_like(e, 1);
    else return derivative_of<I>(e.a);
  }
};

// Leaves that are not the input.
template <std::size_t I, class T, class S, class Device>
struct derivative_rule<I, tensor_view<T, S, Device>> {
  static expr::zero of(const tensor_view<T, S, Device>&) { return {}; }
};
template <std::size_t I, class T, class S, class Device>
struct derivative_rule<I, expr::constant<T, S, Device>> {
  static expr::zero of(const expr::constant<T, S, Device>&) { return {}; }
};
template <std::size_t I, class T, class D, class Device>
struct derivative_rule<I, expr::iota<T, D, Device>> {
  static expr::zero of(const expr::iota<T, D, Device>&) { return {}; }
};
template <std::size_t I, class T, class S, class Device>
struct derivative_rule<I, expr::dropout_mask<T, S, Device>> {
  static expr::zero of(const expr::dropout_mask<T, S, Device>&) { return {}; }
};

template <std::size_t I, class Op, class A>
struct derivative_rule<I, expr::unary<Op, A>> {
  static auto of(const expr::unary<Op, A>& e) {
    const auto& a = e.a;
    const auto da = derivative_of<I>(a);
    using T = typename A::value_type;
    if constexpr (is_zero<decltype(da)>) return da;
    else if constexpr (std::is_same_v<Op, op::negate>) return -da;
    else if constexpr (std::is_same_v<Op, op::exp>) return da * exp(a);
    else if constexpr (std::is_same_v<Op, op::log>) return da / a;
    else if constexpr (std::is_same_v<Op, op::sqrt>) return da * (T(0.5) / sqrt(a));
    else if constexpr (std::is_same_v<Op, op::rsqrt>) return da * (T(-0.5) * rsqrt(a) / a);
    else if constexpr (std::is_same_v<Op, op::tanh>) return da * (T(1) - tanh(a) * tanh(a));
    else if constexpr (std::is_same_v<Op, op::abs>) return where(a > T(0), da, where(a < T(0), -da, 0));  // 0 at 0
    else if constexpr (std::is_same_v<Op, op::relu>) return where(a > T(0), da, 0);
    else return map(Op{}, da);  // cast: the derivative converted
  }
};

template <std::size_t I, class Op, class A, class B>
struct derivative_rule<I, expr::binary<Op, A, B>> {
  static auto of(const expr::binary<Op, A, B>& e) {
    if constexpr (std::is_same_v<typename expr::binary<Op, A, B>::value_type, bool>) {
      return expr::zero{};  // a comparison: its operands are not differentiated
    } else {
      return of_values(e.a, e.b, derivative_of<I>(e.a), derivative_of<I>(e.b));
    }
  }

 private:
  template <class DA, class DB>
  static auto of_values(const A& a, const B& b, const DA& da, const DB& db) {
    if constexpr (std::is_same_v<Op, op::add>) return plus(da, db);
    else if constexpr (std::is_same_v<Op, op::subtract>) return minus(da, db);
    else if constexpr (std::is_same_v<Op, op::multiply>) return plus(times(da, b), times(db, a));
    else if constexpr (std::is_same_v<Op, op::divide>) return minus(times(da, 1 / b), times(db, a / (b * b)));
    else if constexpr (std::is_same_v<Op, op::maximum>) return choose(a >= b, da, db);
    else if constexpr (std::is_same_v<Op, op::minimum>) return choose(a <= b, da, db);
    else static_assert(sizeof(Op) == 0, "attn::derivative: no rule for this operation");
  }
};

template <std::size_t I, class C, class A, class B>
struct derivative_rule<I, expr::select<C, A, B>> {
  static auto of(const expr::select<C, A, B>& e) {
    return choose(e.condition, derivative_of<I>(e.a), derivative_of<I>(e.b));
  }
};

// Layout nodes move the derivative as they move the values: ∂y/∂x reads, for each element of
// y, the derivative at the element of the input that y's element came from.
template <std::size_t I, class To, class A>
struct derivative_rule<I, expr::broadcast<To, A>> {
  static auto of(const expr::broadcast<To, A>& e) {
    const auto da = derivative_of<I>(e.a);
    if constexpr (is_zero<decltype(da)>) return da;
    else return broadcast<To>(da, e.extents());
  }
};
template <std::size_t I, class To, class A>
struct derivative_rule<I, expr::permute<To, A>> {
  static auto of(const expr::permute<To, A>& e) {
    const auto da = derivative_of<I>(e.a);
    if constexpr (is_zero<decltype(da)>) return da;
    else return expr::permute<To, operand_t<decltype(da)>>(da);
  }
};
template <std::size_t I, class To, class A>
struct derivative_rule<I, expr::reshape<To, A>> {
  static auto of(const expr::reshape<To, A>& e) {
    const auto da = derivative_of<I>(e.a);
    if constexpr (is_zero<decltype(da)>) return da;
    else return expr::reshape<To, operand_t<decltype(da)>>(da, e.extents());
  }
};
template <std::size_t I, class D, class A>
struct derivative_rule<I, expr::slice<D, A>> {
  static auto of(const expr::slice<D, A>& e) {
    const auto da = derivative_of<I>(e.a);
    if constexpr (is_zero<decltype(da)>) return da;
    else return expr::slice<D, operand_t<decltype(da)>>(da, e.start, e.extents().template extent<D>());
  }
};

}  // namespace detail

/// ∂e/∂(input I), elementwise: for each element of e, the derivative with respect to the
/// element of input I that it reads (through broadcasts, permutes, reshapes and slices),
/// holding the other inputs and leaves fixed. An expression of e's shape, or expr::zero
/// when e does not read input I. Correct when each element of e reads input I at most at
/// one element, as elementwise expressions do.
template <std::size_t I, expression E>
auto derivative(const E& e) {
  return detail::derivative_of<I>(e);
}

}  // namespace attn
