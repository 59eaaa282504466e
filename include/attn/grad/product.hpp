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
/// same with a; each reordered to its operand's shape. The work is done under positional names
/// (positional_shape): attention's products for every pair of lengths with the same extents
/// share it (docs/model.md, "Compile time").
template <dimension K, class T, class SA, class SB, class Device>
auto product(tape* t, const variable<T, SA, Device>& a, const variable<T, SB, Device>& b) {
  using node = expr::contract<K, tensor_view<const T, SA, Device>, tensor_view<const T, SB, Device>>;
  using SC = typename node::shape_type;
  using all = meta::concat_t<typename SA::dims, meta::difference_t<typename SB::dims, typename SA::dims>>;
  using PA = positional_shape<SA, all>;
  using PB = positional_shape<SB, all>;
  using PK = positional_dim<K, all>;
  using positional_node = expr::contract<PK, tensor_view<const T, PA, Device>, tensor_view<const T, PB, Device>>;
  using PC = typename positional_node::shape_type;
  using free_a = typename detail::only_dim<typename positional_node::a_free_dims>::type;
  using free_b = typename detail::only_dim<typename positional_node::b_free_dims>::type;
  check_common_extents("attn::grad::product", a.extents(), b.extents());  // by the operands' names
  variable<T, SC, Device> c(evaluate_as<SC>(contract<PK>(value_as<PA>(a), value_as<PB>(b))), recording(t, a, b));
  if (c.requires_grad()) {
    // Each operand's gradient reads the other's value: an operand's value is kept only for that.
    t->record([a = b.requires_grad() ? a : a.without_value(), b = a.requires_grad() ? b : b.without_value(),
               c = c.without_value()] {
      if (!c.has_grad()) return;
      const auto dc = gradient_as<PC>(c);
      if (a.requires_grad())
        accumulate_as<PA>(a, detail::in_order_of<PA>(contract<free_b>(dc, value_as<PB>(b))));
      if (b.requires_grad())
        accumulate_as<PB>(b, detail::in_order_of<PB>(contract<free_a>(dc, value_as<PA>(a))));
    });
  }
  return c;
}

}  // namespace attn::grad
