// Attention masks as additive biases [batch, queries, keys]: 0 where a query may attend to a
// key, a large negative number where it may not (paper §3.2.3: "setting to −∞").
#pragma once

#include <limits>

#include "../core/tensor.hpp"
#include "dims.hpp"

namespace attn::nn {

/// Added to scores of forbidden keys. Finite, so a row with every key masked stays a number;
/// large enough that exp(score + bias − max) is exactly 0 in float and double.
template <class T>
inline constexpr T masked = T(-1e9);

/// Keys that are padding are hidden from every query: encoder self-attention and
/// encoder-decoder attention. `queries` is the number of query positions.
template <class T, class Q, class K>
tensor<T, shape<batch, Q, keys>> padding_mask(const tensor<token, shape<batch, K>>& key_ids, index_t queries,
                                              token pad) {
  const index_t sentences = key_ids.template extent<batch>(), length = key_ids.template extent<K>();
  tensor<T, shape<batch, Q, keys>> bias(sentences, queries, length);
  for (index_t b = 0; b < sentences; ++b)
    for (index_t q = 0; q < queries; ++q)
      for (index_t k = 0; k < length; ++k) bias(b, q, k) = key_ids(b, k) == pad ? masked<T> : T{0};
  return bias;
}

/// Decoder self-attention: position i sees positions ≤ i that are not padding, so that
/// predictions for position i depend only on the outputs before it (§3.2.3).
template <class T, class Q>
tensor<T, shape<batch, Q, keys>> causal_mask(const tensor<token, shape<batch, Q>>& ids, token pad) {
  const index_t sentences = ids.template extent<batch>(), length = ids.template extent<Q>();
  tensor<T, shape<batch, Q, keys>> bias(sentences, length, length);
  for (index_t b = 0; b < sentences; ++b)
    for (index_t q = 0; q < length; ++q)
      for (index_t k = 0; k < length; ++k) bias(b, q, k) = (k > q || ids(b, k) == pad) ? masked<T> : T{0};
  return bias;
}

}  // namespace attn::nn
