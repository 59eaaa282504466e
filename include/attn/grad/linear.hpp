// The affine map x·W + b over the last dimension: every projection of the model
// (attention's W^Q, W^K, W^V, W^O and the feed-forward's two layers, paper §3.2.2, eq. (2)).
#pragma once

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

/// y = x·W + b for x [B, L, In], W [In, Out], b [Out]; y is [B, L, Out].
/// Backward: dx = dy·Wᵀ, dW = xᵀ·dy and db = Σ dy over all positions.
template <class T, class B, class L, class In, class Out, class Device>
variable<T, shape<B, L, Out>, Device> linear(tape* t, const variable<T, shape<B, L, In>, Device>& x,
                                             const variable<T, shape<In, Out>, Device>& w,
                                             const variable<T, shape<Out>, Device>& b) {
  using Y = shape<B, L, Out>;
  variable<T, Y, Device> y(tensor<T, Y, Device>(gather_extents<Y>(x.extents(), w.extents()), uninitialized),
                           recording(t, x, w, b));
  y.value() = contract<In>(x.value(), w.value());
  y.value() = y.value() + broadcast_like(b.value(), y.value());
  if (y.requires_grad()) {
    t->record([x, w, b, y] {
      if (!y.has_grad()) return;
      const auto& dy = y.grad();
      if (x.requires_grad()) x.accumulate(contract<Out>(dy, w.value()));
      auto dy_rows = merge<B, L, detail::rows>(dy);
      if (w.requires_grad()) w.accumulate(contract<detail::rows>(merge<B, L, detail::rows>(x.value()), dy_rows));
      if (b.requires_grad()) b.accumulate(sum<detail::rows>(dy_rows));
    });
  }
  return y;
}

/// y = x·Wᵀ for x [B, L, In] and W [Out, In]: the pre-softmax projection with the embedding
/// matrix (paper §3.4), whose rows are the output classes.
template <class T, class B, class L, class In, class Out, class Device>
variable<T, shape<B, L, Out>, Device> project_rows(tape* t, const variable<T, shape<B, L, In>, Device>& x,
                                                   const variable<T, shape<Out, In>, Device>& w) {
  variable<T, shape<B, L, Out>, Device> y(contract<In>(x.value(), w.value()), recording(t, x, w));
  if (y.requires_grad()) {
    t->record([x, w, y] {
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
