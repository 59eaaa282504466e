// Differentiable elementwise operations: sums (residual connections), scaling, ReLU, and a
// sum with an operand repeated along one dimension (positional encodings, biases), and its
// adjoint, the sum along a dimension (additive attention's vᵀ tanh(·)).
#pragma once

#include <utility>

#include "../expr/broadcast.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"
#include "variable.hpp"

namespace attn::grad {

/// a + b. Its work is done under positional names (view_as), once for every naming of S.
template <class T, class S, class Device>
variable<T, S, Device> add(tape* t, const variable<T, S, Device>& a, const variable<T, S, Device>& b) {
  using P = positional<S>;
  check_common_extents("attn::grad::add", a.extents(), b.extents());
  variable<T, S, Device> y(evaluate_as<S>(value_as<P>(a) + value_as<P>(b)), recording(t, a, b));
  if (y.requires_grad()) {
    t->record([a = a.without_value(), b = b.without_value(), y = y.without_value()] {
      if (!y.has_grad()) return;
      if (a.requires_grad()) accumulate_as<P>(a, gradient_as<P>(y));
      if (b.requires_grad()) accumulate_as<P>(b, gradient_as<P>(y));
    });
  }
  return y;
}

/// x · c for a constant c.
template <class T, class S, class Device>
variable<T, S, Device> scale(tape* t, const variable<T, S, Device>& x, T c) {
  variable<T, S, Device> y(x.value() * c, recording(t, x));
  if (y.requires_grad()) {
    t->record([x = x.without_value(), y = y.without_value(), c] {
      if (y.has_grad()) x.accumulate(y.grad() * c);
    });
  }
  return y;
}

/// max(x, 0); the gradient passes where the output is positive.
template <class T, class S, class Device>
variable<T, S, Device> relu(tape* t, const variable<T, S, Device>& x) {
  variable<T, S, Device> y(attn::relu(x.value()), recording(t, x));
  if (y.requires_grad()) {
    t->record([x = x.without_value(), y] {
      if (y.has_grad()) x.accumulate(where(y.value() > T{0}, y.grad(), T{0}));
    });
  }
  return y;
}

/// x + p repeated along dimension D of x (p has x's shape without D). The gradient of p sums
/// over D. Its work is done under positional names (view_as), once for every naming of S.
template <dimension D, class T, class S, class P, class Device>
variable<T, S, Device> add_broadcast(tape* t, const variable<T, S, Device>& x,
                                     const variable<T, P, Device>& p) {
  static_assert(std::is_same_v<P, remove_dim<S, D>>,
                "attn::grad::add_broadcast: the added operand must have the shape of x without the repeated dimension");
  using XP = positional<S>;
  using PP = positional_shape<P, typename S::dims>;
  check_common_extents("attn::grad::add_broadcast", p.extents(), x.extents());
  const auto x_ = value_as<XP>(x);
  variable<T, S, Device> y(evaluate_as<S>(x_ + broadcast_like(value_as<PP>(p), x_)), recording(t, x, p));
  if (y.requires_grad()) {
    t->record([x = x.without_value(), p = p.without_value(), y = y.without_value()] {
      if (!y.has_grad()) return;
      if (x.requires_grad()) accumulate_as<XP>(x, gradient_as<XP>(y));
      if (p.requires_grad()) accumulate_as<PP>(p, sum<positional_dim<D, typename S::dims>>(gradient_as<XP>(y)));
    });
  }
  return y;
}

/// Σ_D x: x's shape without D. The gradient repeats along D.
template <dimension D, class T, class S, class Device>
variable<T, remove_dim<S, D>, Device> sum(tape* t, const variable<T, S, Device>& x) {
  variable<T, remove_dim<S, D>, Device> y(attn::sum<D>(x.value()), recording(t, x));
  if (y.requires_grad()) {
    t->record([x, y] {
      if (y.has_grad() && x.requires_grad()) x.accumulate(broadcast_like(y.grad(), x.value()));
    });
  }
  return y;
}

}  // namespace attn::grad
