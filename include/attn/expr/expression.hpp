// What an expression is, and how operands are held: views and nodes by value, never a temporary tensor.
#pragma once

#include <concepts>
#include <type_traits>
#include <utility>

#include "../core/extents.hpp"
#include "../core/tensor.hpp"

namespace attn {

/// Anything with a value type, a shape, a device and run-time extents: tensor views and the
/// nodes built from them. Building an expression computes nothing; assigning it to a tensor
/// lowers it to the tensor's device.
template <class E>
concept expression = requires(const E& e) {
  typename E::value_type;
  typename E::shape_type;
  typename E::device_type;
  { e.extents() } -> std::convertible_to<extents<typename E::shape_type>>;
};

/// What a user may pass to an operation: an expression or a named (lvalue) tensor.
template <class X>
concept operand = expression<std::remove_cvref_t<X>> || is_tensor_v<std::remove_cvref_t<X>>;

namespace detail {
template <class X>
inline constexpr bool is_temporary_tensor =
    is_tensor_v<std::remove_cvref_t<X>> && !std::is_lvalue_reference_v<X>;
}  // namespace detail

/// Turns what a user passed into what a node stores: a tensor becomes a read-only view of
/// it (the tensor must outlive the expression), a view or a node is copied (they are small).
template <operand X>
auto as_operand(X&& x) {
  using plain = std::remove_cvref_t<X>;
  static_assert(!detail::is_temporary_tensor<X&&>,
                "attn: an expression cannot keep a temporary tensor alive; name it first");
  if constexpr (is_tensor_v<plain>) {
    return x.view();
  } else if constexpr (is_tensor_view_v<plain>) {
    return tensor_view<const typename plain::value_type, typename plain::shape_type,
                       typename plain::device_type>(x);
  } else {
    return plain(std::forward<X>(x));
  }
}

/// The stored form of an operand of type X.
template <class X>
using operand_t = decltype(as_operand(std::declval<X>()));

/// Value type, shape and device of an operand.
template <class X>
using value_t = typename std::remove_cvref_t<X>::value_type;
template <class X>
using shape_t = typename std::remove_cvref_t<X>::shape_type;
template <class X>
using device_t = typename std::remove_cvref_t<X>::device_type;

/// Calls f on every tensor view at the leaves of an expression.
template <expression E, class F>
void for_each_leaf(const E& e, F&& f) {
  if constexpr (is_tensor_view_v<E>) {
    f(e);
  } else {
    e.for_each_child([&](const auto& child) { for_each_leaf(child, f); });
  }
}

namespace detail {
/// Nodes that backends evaluate as engines of their own (GEMMs, reductions), not fused loops.
template <class E>
inline constexpr bool is_materialised =
    requires { typename E::contracted_dim; } || requires { typename E::reduced_dim; };

/// The shape rule of `view = expression`, the same for every device's executor.
template <class T, class S, class Device, class E>
constexpr void check_assignment() {
  static_assert(expression<E>, "attn::assign: the right-hand side is not an expression");
  static_assert(std::is_same_v<typename E::shape_type, S>,
                "attn::assign: the expression's shape differs from the destination's");
  static_assert(std::is_same_v<typename E::value_type, std::remove_const_t<T>>,
                "attn::assign: value types differ (use attn::cast)");
  static_assert(std::is_same_v<typename E::device_type, Device>,
                "attn::assign: the expression lives on another device");
}
}  // namespace detail

/// Evaluates an expression into a new tensor on its device.
template <expression E>
auto eval(const E& e) {
  return tensor<typename E::value_type, typename E::shape_type, typename E::device_type>(e);
}

}  // namespace attn
