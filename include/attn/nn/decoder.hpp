// The decoder (paper §3.1): N identical layers of masked self-attention, encoder-decoder
// attention and feed-forward.
#pragma once

#include "encoder.hpp"

namespace attn::nn {

template <class T, class C, class Device = cpu>
struct decoder_layer {
  using A = activation_t<T>;
  using P = parameter_t<T>;
  using d_model = typename C::d_model;

  multi_head_attention<T, C, Device> self_attention, cross_attention;
  feed_forward<T, C, Device> ffn;
  residual<T, C, Device> self_block, cross_block, ffn_block;

  decoder_layer(random_stream& init, const hyperparameters& h)
      : self_attention(init, attention_kind::decoder_self, variant_spec::parse(h.attention), h.attention_dropout),
        cross_attention(init, attention_kind::encoder_decoder, variant_spec::parse(h.attention), h.attention_dropout),
        ffn(init),
        self_block(h.dropout),
        cross_block(h.dropout),
        ffn_block(h.dropout) {}

  /// y [batch, L, d_model] attends to itself under `causal` [batch, L, keys] and to the encoder
  /// output memory [batch, M, d_model] under `memory_mask` [batch, L, keys].
  template <class L, class M>
  grad::variable<A, shape<batch, L, d_model>, Device> operator()(
      const context& ctx, const grad::variable<A, shape<batch, L, d_model>, Device>& y,
      const grad::variable<A, shape<batch, M, d_model>, Device>& memory,
      const attention_mask<A, batch, L, Device>& causal,
      const attention_mask<A, batch, L, Device>& memory_mask) const {
    return with_attention(
        ctx, y, [&](const auto& in) { return self_attention(ctx, in, in, causal); },
        [&](const auto& in) { return cross_attention(ctx, in, memory, memory_mask); });
  }

  /// The layer's three blocks around given attentions: `attend_self(in)` and `attend_memory(in)`
  /// give [batch, L, d_model]. Incremental decoding passes attentions over its key/value cache.
  template <class L, class SelfAttention, class MemoryAttention>
  grad::variable<A, shape<batch, L, d_model>, Device> with_attention(
      const context& ctx, const grad::variable<A, shape<batch, L, d_model>, Device>& y, SelfAttention&& attend_self,
      MemoryAttention&& attend_memory) const {
    auto h = self_block(ctx, y, attend_self);
    h = cross_block(ctx, h, attend_memory);
    return ffn_block(ctx, h, [&](const auto& in) { return ffn(ctx, in); });
  }

  void collect(grad::parameter_list<P, Device>& list) {
    list.add_module("self_attention", self_attention);
    list.add_module("self_attention_block", self_block);
    list.add_module("cross_attention", cross_attention);
    list.add_module("cross_attention_block", cross_block);
    list.add_module("ffn", ffn);
    list.add_module("ffn_block", ffn_block);
  }
};

template <class T, class C, class Device = cpu>
using decoder = stack<T, decoder_layer<T, C, Device>, C, Device>;

}  // namespace attn::nn
