// Differentiable batched products: contract<K>(a, b) with one free dimension on each side,
// as in attention's Q·Kᵀ and weights·V (paper §3.2.1, eq. (1)).
#pragma once

#include <type_traits>

#include "../expr/contract.hpp"
#include "../expr/layout.hpp"
#include "variable.hpp"

namespace attn::grad {

namespace detail {
/// e reordered to shape S when its dimensions are S's in another order.
template <class S, class E>
auto in_order_of(const E& e) {
  if constexpr (std::is_same_v<typename E::shape_type, S>) {
    return e;
  } else {
    return []<class... Ds>(const E& x, meta::list<Ds...>) { return permute<Ds...>(x); }(e, typename S::dims{});
  }
}

template <class List>
struct only_dim {
  static_assert(List::size == 1,
                "attn::grad::product: each operand must have exactly one free dimension");
  using type = meta::at_t<0, List>;
};
}  // namespace detail

/// c = contract<K>(a, b). Backward: da = dc·b contracted over b's free dimension, and db the
/// same with a; each reordered to its operand's shape.
template <dimension K, class T, class SA, class SB, class Device>
auto product(tape* t, const variable<T, SA, Device>& a, const variable<T, SB, Device>& b) {
  using node = expr::contract<K, tensor_view<const T, SA, Device>, tensor_view<const T, SB, Device>>;
  using SC = typename node::shape_type;
  using free_a = typename detail::only_dim<typename node::a_free_dims>::type;
  using free_b = typename detail::only_dim<typename node::b_free_dims>::type;
  variable<T, SC, Device> c(contract<K>(a.value(), b.value()), recording(t, a, b));
  if (c.requires_grad()) {
    // Each operand's gradient reads the other's value: an operand's value is kept only for that.
    t->record([a = b.requires_grad() ? a : a.without_value(), b = a.requires_grad() ? b : b.without_value(),
               c = c.without_value()] {
      if (!c.has_grad()) return;
      const auto& dc = c.grad();
      if (a.requires_grad()) a.accumulate(detail::in_order_of<SA>(contract<free_b>(dc, b.value())));
      if (b.requires_grad()) b.accumulate(detail::in_order_of<SB>(contract<free_a>(dc, a.value())));
    });
  }
  return c;
}

}  // namespace attn::grad
