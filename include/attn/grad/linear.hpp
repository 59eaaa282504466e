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

/// The affine map's dimensions under names of its own, each with its extent: its work is compiled
/// once for every naming of B, L, In and Out with the same extents (the encoder's and the
/// decoder's projections, whose lengths have different names, share it; docs/model.md,
/// "Compile time").
template <index_t Batch, index_t Length, index_t In, index_t Out>
struct affine_names {
  using batch = dim<"affine.batch", Batch>;
  using length = dim<"affine.length", Length>;
  using in = dim<"affine.in", In>;
  using out = dim<"affine.out", Out>;
  using x = shape<batch, length, in>;
  using w = shape<in, out>;
  using b = shape<out>;
  using y = shape<batch, length, out>;
};

/// y = x·W + b, or relu(x·W + b), under affine_names, as one assignment: a backend applies the bias
/// and the ReLU as the product's epilogue (expr/affine.hpp). Out of line: every naming shares it.
template <bool Relu, class Names, class T, class Device>
[[gnu::noinline]] void affine_forward(const tensor_view<T, typename Names::y, Device>& y,
                                      const tensor_view<const T, typename Names::x, Device>& x,
                                      const tensor_view<const T, typename Names::w, Device>& w,
                                      const tensor_view<const T, typename Names::b, Device>& b) {
  const auto product = contract<typename Names::in>(x, w) + broadcast_like(b, y);
  if constexpr (Relu) y = relu(product);
  else y = product;
}

/// y = x·W + b, or relu(x·W + b) (affine_forward). Backward: dz = dy (⊙ [y > 0] after a ReLU, in
/// place: nothing else reads y's gradient), dx = dz·Wᵀ, dW = xᵀ·dz and db = Σ dz over all
/// positions. Every step's work is done under affine_names.
template <bool Relu, class T, class B, class L, class In, class Out, class Device>
variable<T, shape<B, L, Out>, Device> affine(tape* t, const variable<T, shape<B, L, In>, Device>& x,
                                             const variable<T, shape<In, Out>, Device>& w,
                                             const variable<T, shape<Out>, Device>& b) {
  using Y = shape<B, L, Out>;
  using names = affine_names<B::extent, L::extent, In::extent, Out::extent>;
  using out = typename names::out;
  check_common_extents("attn::grad::linear", x.extents(), w.extents());  // by the operands' names
  check_common_extents("attn::grad::linear", w.extents(), b.extents());
  variable<T, Y, Device> y(tensor<T, Y, Device>(gather_extents<Y>(x.extents(), w.extents()), uninitialized),
                           recording(t, x, w, b));
  affine_forward<Relu, names>(view_as<typename names::y>(y.value().view()), value_as<typename names::x>(x),
                              value_as<typename names::w>(w), value_as<typename names::b>(b));
  if (y.requires_grad()) {
    // dx reads W, dW reads x, and the ReLU's mask reads y: nothing else is kept for the backward pass.
    t->record([x = w.requires_grad() ? x : x.without_value(), w, b = b.without_value(),
               y = Relu ? y : y.without_value()] {
      if (!y.has_grad()) return;
      using batch = typename names::batch;
      using length = typename names::length;
      const auto gradient = view_as<typename names::y>(y.grad().view());
      if constexpr (Relu) assign_to(gradient, where(value_as<typename names::y>(y) > T{0}, gradient, T{0}));
      const tensor_view<const T, typename names::y, Device> dy = gradient;
      if (x.requires_grad())
        accumulate_as<typename names::x>(x, contract<out>(dy, value_as<typename names::w>(w)));
      auto dy_rows = merge<batch, length, rows>(dy);
      if (w.requires_grad())
        accumulate_as<typename names::w>(
            w, contract<rows>(merge<batch, length, rows>(value_as<typename names::x>(x)), dy_rows));
      if (b.requires_grad()) accumulate_as<typename names::b>(b, sum<rows>(dy_rows));
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
