// The encoder (paper §3.1): N identical layers of self-attention and feed-forward.
#pragma once

#include <string>
#include <vector>

#include "attention.hpp"
#include "feed_forward.hpp"
#include "precision.hpp"
#include "residual.hpp"

namespace attn::nn {

template <class T, class C, class Device = cpu>
struct encoder_layer {
  using A = activation_t<T>;
  using P = parameter_t<T>;
  multi_head_attention<T, C, Device> self_attention;
  feed_forward<T, C, Device> ffn;
  residual<T, C, Device> attention_block, ffn_block;

  encoder_layer(random_stream& init, const hyperparameters& h)
      : self_attention(init, attention_kind::encoder_self, variant_spec::parse(h.attention), h.attention_dropout),
        ffn(init),
        attention_block(h.dropout),
        ffn_block(h.dropout) {}

  /// x [batch, L, d_model]; mask [batch, L, keys] hides padding.
  template <class L>
  grad::variable<A, shape<batch, L, typename C::d_model>, Device> operator()(
      const context& ctx, const grad::variable<A, shape<batch, L, typename C::d_model>, Device>& x,
      const attention_mask<A, batch, L, Device>& mask) const {
    auto h = attention_block(ctx, x, [&](const auto& in) { return self_attention(ctx, in, in, mask); });
    return ffn_block(ctx, h, [&](const auto& in) { return ffn(ctx, in); });
  }

  void collect(grad::parameter_list<P, Device>& list) {
    list.add_module("self_attention", self_attention);
    list.add_module("self_attention_block", attention_block);
    list.add_module("ffn", ffn);
    list.add_module("ffn_block", ffn_block);
  }
};

/// A stack of N layers (N = h.layers); pre-norm stacks end with a LayerNorm of their own.
template <class T, class Layer, class C, class Device = cpu>
struct stack {
  using A = activation_t<T>;
  using P = parameter_t<T>;
  std::vector<Layer> layers;
  layer_norm<T, typename C::d_model, Device> final_norm{C::layer_norm_epsilon};

  stack(random_stream& init, const hyperparameters& h) {
    layers.reserve(static_cast<std::size_t>(h.layers));
    for (int i = 0; i < h.layers; ++i) layers.emplace_back(init, h);
  }

  template <class S, class... Masks>
  grad::variable<A, S, Device> operator()(const context& ctx, grad::variable<A, S, Device> x,
                                          const Masks&... inputs) const {
    for (const Layer& layer : layers) x = layer(ctx, x, inputs...);
    if constexpr (C::norm == norm_placement::pre) x = final_norm(ctx, x);
    return x;
  }

  void collect(grad::parameter_list<P, Device>& list) {
    for (std::size_t i = 0; i < layers.size(); ++i) list.add_module("layer." + std::to_string(i), layers[i]);
    if constexpr (C::norm == norm_placement::pre) list.add_module("final_norm", final_norm);
  }
};

template <class T, class C, class Device = cpu>
using encoder = stack<T, encoder_layer<T, C, Device>, C, Device>;

}  // namespace attn::nn
