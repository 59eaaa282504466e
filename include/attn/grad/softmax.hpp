// Softmax along one dimension, with the scale and additive mask of attention (paper §3.2.1).
#pragma once

#include "../expr/broadcast.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"
#include "variable.hpp"

namespace attn::grad {

namespace detail {
/// y = softmax_D(y) in place, one row at a time: exp(y − max) / Σ exp(y − max).
template <class D, class T, class S, class Device>
void softmax_in_place(tensor<T, S, Device>& y) {
  const auto row_max = eval(max<D>(y));
  y = exp(y - broadcast_like(row_max, y));
  const auto row_sum = eval(sum<D>(y));
  y = y * broadcast_like(T{1} / row_sum, y);
}

template <class D, class T, class S, class Device>
void record_softmax(tape* t, const variable<T, S, Device>& x, const variable<T, S, Device>& y, T scale) {
  // dx = scale · y ⊙ (dy − Σ_D dy ⊙ y)
  t->record([x, y, scale] {
    if (!y.has_grad()) return;
    const auto& dy = y.grad();
    const auto dot = eval(sum<D>(dy * y.value()));
    x.accumulate((dy - broadcast_like(dot, dy)) * y.value() * scale);
  });
}
}  // namespace detail

/// softmax along D of x · scale.
template <dimension D, class T, class S, class Device>
variable<T, S, Device> softmax(tape* t, const variable<T, S, Device>& x, T scale = T{1}) {
  variable<T, S, Device> y(x.value() * scale, recording(t, x));
  detail::softmax_in_place<D>(y.value());
  if (y.requires_grad()) detail::record_softmax<D>(t, x, y, scale);
  return y;
}

/// softmax along D of x · scale + bias, the bias repeated over x's other dimensions: a mask
/// that is 0 where attention may look and a large negative number where it may not.
template <dimension D, class T, class S, class Device, class BiasShape>
variable<T, S, Device> softmax(tape* t, const variable<T, S, Device>& x, T scale,
                               const tensor<T, BiasShape, Device>& bias) {
  variable<T, S, Device> y(x.value() * scale + broadcast_like(bias, x.value()), recording(t, x));
  detail::softmax_in_place<D>(y.value());
  if (y.requires_grad()) detail::record_softmax<D>(t, x, y, scale);
  return y;
}

}  // namespace attn::grad
