// The position-wise feed-forward network (paper §3.3, eq. (2)): FFN(x) = max(0, x W1 + b1) W2 + b2.
#pragma once

#include "context.hpp"
#include "linear.hpp"
#include "precision.hpp"

namespace attn::nn {

template <class T, class C, class Device = cpu>
struct feed_forward {
  using A = activation_t<T>;
  using P = parameter_t<T>;
  using d_model = typename C::d_model;
  using d_ff = typename C::d_ff;

  linear<T, d_model, d_ff, Device> inner;
  linear<T, d_ff, d_model, Device> outer;

  explicit feed_forward(random_stream& init) : inner(init), outer(init) {}

  template <class B, class L>
  grad::variable<A, shape<B, L, d_model>, Device> operator()(
      const context& ctx, const grad::variable<A, shape<B, L, d_model>, Device>& x) const {
    return outer(ctx, inner.relu(ctx, x));
  }

  void collect(grad::parameter_list<P, Device>& list) {
    list.add_module("inner", inner);
    list.add_module("outer", outer);
  }
};

}  // namespace attn::nn
