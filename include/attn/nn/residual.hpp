// Residual connection around a sub-layer, with dropout and layer normalisation (paper §3.1,
// §5.4): LayerNorm(x + Dropout(Sublayer(x))) after the paper, or, pre-norm,
// x + Dropout(Sublayer(LayerNorm(x))).
#pragma once

#include "../grad/elementwise.hpp"
#include "context.hpp"
#include "layer_norm.hpp"
#include "precision.hpp"

namespace attn::nn {

template <class T, class C, class Device = cpu>
struct residual {
  using A = activation_t<T>;
  using P = parameter_t<T>;
  layer_norm<T, typename C::d_model, Device> norm{C::layer_norm_epsilon};
  double dropout_rate;  // P_drop

  explicit residual(double p_drop = C::dropout) : dropout_rate(p_drop) {}

  template <class S, class Sublayer>
  grad::variable<A, S, Device> operator()(const context& ctx, const grad::variable<A, S, Device>& x,
                                          Sublayer&& sublayer) const {
    if constexpr (C::norm == norm_placement::post) {
      return norm(ctx, add_dropout(ctx, x, sublayer(x), dropout_rate));
    } else {
      return add_dropout(ctx, x, sublayer(norm(ctx, x)), dropout_rate);
    }
  }

  void collect(grad::parameter_list<P, Device>& list) { list.add_module("norm", norm); }
};

}  // namespace attn::nn
