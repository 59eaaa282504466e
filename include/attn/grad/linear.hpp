// The affine map x·W + b over the last dimension: every projection of the model
// (attention's W^Q, W^K, W^V, W^O and the feed-forward's two layers, paper §3.2.2, eq. (2)).
#pragma once

#include "../expr/affine.hpp"
#include "../expr/broadcast.hpp"
#include "../expr/contract.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/layout.hpp"
#include "../expr/reduce.hpp"
#include "variable.hpp"

namespace attn::grad {

namespace detail {
/// The positions of a [batch, len, ...] activation seen as one dimension, for weight gradients.
using rows = dim<"rows">;
}  // namespace detail

namespace detail {
/// y = x·W + b, or relu(x·W + b), as one assignment: a backend applies the bias and the ReLU as
/// the product's epilogue (expr/affine.hpp). Backward: dz = dy (⊙ [y > 0] after a ReLU, in
/// place: nothing else reads y's gradient), dx = dz·Wᵀ, dW = xᵀ·dz and db = Σ dz over all positions.
template <bool Relu, class T, class B, class L, class In, class Out, class Device>
variable<T, shape<B, L, Out>, Device> affine(tape* t, const variable<T, shape<B, L, In>, Device>& x,
                                             const variable<T, shape<In, Out>, Device>& w,
                                             const variable<T, shape<Out>, Device>& b) {
  using Y = shape<B, L, Out>;
  variable<T, Y, Device> y(tensor<T, Y, Device>(gather_extents<Y>(x.extents(), w.extents()), uninitialized),
                           recording(t, x, w, b));
  const auto product = contract<In>(x.value(), w.value()) + broadcast_like(b.value(), y.value());
  if constexpr (Relu) y.value() = relu(product);
  else y.value() = product;
  if (y.requires_grad()) {
    // dx reads W, dW reads x, and the ReLU's mask reads y: nothing else is kept for the backward pass.
    t->record([x = w.requires_grad() ? x : x.without_value(), w, b = b.without_value(),
               y = Relu ? y : y.without_value()] {
      if (!y.has_grad()) return;
      auto& dy = y.grad();
      if constexpr (Relu) dy = where(y.value() > T{0}, dy, T{0});
      if (x.requires_grad()) x.accumulate(contract<Out>(dy, w.value()));
      auto dy_rows = merge<B, L, rows>(dy);
      if (w.requires_grad()) w.accumulate(contract<rows>(merge<B, L, rows>(x.value()), dy_rows));
      if (b.requires_grad()) b.accumulate(sum<rows>(dy_rows));
    });
  }
  return y;
}
}  // namespace detail

/// y = x·W + b for x [B, L, In], W [In, Out], b [Out]; y is [B, L, Out].
template <class T, class B, class L, class In, class Out, class Device>
variable<T, shape<B, L, Out>, Device> linear(tape* t, const variable<T, shape<B, L, In>, Device>& x,
                                             const variable<T, shape<In, Out>, Device>& w,
                                             const variable<T, shape<Out>, Device>& b) {
  return detail::affine<false>(t, x, w, b);
}

/// y = max(0, x·W + b): the feed-forward network's first layer (paper eq. (2)) in one
/// operation, so that the ReLU rides on the product's epilogue; the gradient passes where
/// y is positive.
template <class T, class B, class L, class In, class Out, class Device>
variable<T, shape<B, L, Out>, Device> linear_relu(tape* t, const variable<T, shape<B, L, In>, Device>& x,
                                                  const variable<T, shape<In, Out>, Device>& w,
                                                  const variable<T, shape<Out>, Device>& b) {
  return detail::affine<true>(t, x, w, b);
}

/// y = x·Wᵀ for x [B, L, In] and W [Out, In]: the pre-softmax projection with the embedding
/// matrix (paper §3.4), whose rows are the output classes.
template <class T, class B, class L, class In, class Out, class Device>
variable<T, shape<B, L, Out>, Device> project_rows(tape* t, const variable<T, shape<B, L, In>, Device>& x,
                                                   const variable<T, shape<Out, In>, Device>& w) {
  variable<T, shape<B, L, Out>, Device> y(contract<In>(x.value(), w.value()), recording(t, x, w));
  if (y.requires_grad()) {
    t->record([x = w.requires_grad() ? x : x.without_value(), w, y = y.without_value()] {
      if (!y.has_grad()) return;
      const auto& dy = y.grad();
      if (x.requires_grad()) x.accumulate(contract<Out>(dy, w.value()));
      if (w.requires_grad())
        w.accumulate(contract<detail::rows>(merge<B, L, detail::rows>(dy), merge<B, L, detail::rows>(x.value())));
    });
  }
  return y;
}

}  // namespace attn::grad
