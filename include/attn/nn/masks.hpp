// Attention masks as additive biases [batch, queries, keys]: 0 where a query may attend to a
// key, a large negative number where it may not (paper §3.2.3: "setting to −∞").
#pragma once

#include <limits>

#include "../core/fused_attention.hpp"
#include "../core/primitives.hpp"
#include "../core/tensor.hpp"
#include "dims.hpp"

namespace attn::nn {

/// Added to scores of forbidden keys. Finite, so a row with every key masked stays a number;
/// large enough that exp(score + bias − max) is exactly 0 in float and double.
template <class T>
inline constexpr T masked = T(-1e9);
static_assert(masked<float> <= hidden_bias, "attn::nn: the fused kernel must see masked keys as hidden");

/// Keys that are padding are hidden from every query: encoder self-attention and
/// encoder-decoder attention. `queries` is the number of query positions.
template <class T, class Q, class K, class Device>
tensor<T, shape<batch, Q, keys>, Device> padding_mask(const tensor<token, shape<batch, K>, Device>& key_ids,
                                                      index_t queries, token pad) {
  const index_t sentences = key_ids.template extent<batch>(), length = key_ids.template extent<K>();
  tensor<T, shape<batch, Q, keys>, Device> bias(extents<shape<batch, Q, keys>>(sentences, queries, length),
                                                uninitialized);
  primitives<Device>::attention_mask(bias.data(), key_ids.data(), sentences, queries, length, pad, false, masked<T>);
  return bias;
}

/// Decoder self-attention: position i sees positions ≤ i that are not padding, so that
/// predictions for position i depend only on the outputs before it (§3.2.3).
template <class T, class Q, class Device>
tensor<T, shape<batch, Q, keys>, Device> causal_mask(const tensor<token, shape<batch, Q>, Device>& ids, token pad) {
  const index_t sentences = ids.template extent<batch>(), length = ids.template extent<Q>();
  tensor<T, shape<batch, Q, keys>, Device> bias(extents<shape<batch, Q, keys>>(sentences, length, length),
                                                uninitialized);
  primitives<Device>::attention_mask(bias.data(), ids.data(), sentences, length, length, pad, true, masked<T>);
  return bias;
}

}  // namespace attn::nn
