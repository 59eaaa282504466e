// What both model scorers (kv_cache.hpp, recompute.hpp) do with rows of hypotheses: build the
// source batch, keep rows, turn the last position's logits into log-probabilities.
#pragma once

#include <algorithm>
#include <span>
#include <type_traits>
#include <vector>

#include "../core/primitives.hpp"
#include "../core/transfer.hpp"
#include "../expr.hpp"
#include "../nn/dims.hpp"
#include "search.hpp"

namespace attn::decode {

/// Source sentences as the model was trained to read them: ids + end symbol, padded to the
/// longest: [batch, src].
inline tensor<nn::token, shape<nn::batch, nn::src>> source_batch(std::span<const std::vector<token>> sentences,
                                                                  token pad, token eos) {
  std::size_t longest = 0;
  for (const auto& s : sentences) longest = std::max(longest, s.size());
  tensor<nn::token, shape<nn::batch, nn::src>> ids(index_t(sentences.size()), index_t(longest + 1));
  for (std::size_t b = 0; b < sentences.size(); ++b) {
    for (std::size_t i = 0; i <= longest; ++i)
      ids(index_t(b), index_t(i)) = i < sentences[b].size() ? sentences[b][i] : i == sentences[b].size() ? eos : pad;
  }
  return ids;
}

/// The rows of x [rows, ...] that go on, in their new order: row i of the result is rows[i] of x.
template <class T, class B, class... Rest, class Device>
tensor<T, shape<B, Rest...>, Device> keep_rows(const tensor<T, shape<B, Rest...>, Device>& x,
                                               std::span<const index_t> rows) {
  auto sizes = x.extents().sizes();
  const index_t old_rows = sizes[0];
  const index_t width = old_rows == 0 ? 0 : x.size() / old_rows;
  sizes[0] = index_t(rows.size());
  tensor<T, shape<B, Rest...>, Device> kept(extents<shape<B, Rest...>>::from_array(sizes), uninitialized);
  primitives<Device>::select_rows(kept.data(), x.data(), old_rows, width, rows.data(), index_t(rows.size()));
  return kept;
}

/// log softmax over the vocabulary of logits [rows, 1, vocab], written row after row to `out`:
/// one pass of the device's row kernel, into `out` itself where the host addresses the
/// device's memory, else into a tensor copied to the host once.
template <class T, class L, class Device>
void next_token_log_probs(const tensor<T, shape<nn::batch, L, nn::vocab>, Device>& logits, std::vector<float>& out) {
  using A = accumulate_t<T>;
  const index_t width = logits.template extent<nn::vocab>();
  const index_t rows = width == 0 ? 0 : logits.size() / width;
  out.resize(std::size_t(logits.size()));
  if constexpr (std::is_same_v<A, float> && host_addressable<Device>) {
    primitives<Device>::log_softmax_rows(out.data(), logits.data(), rows, width);
    return;
  }
  tensor<A, shape<nn::batch, L, nn::vocab>, Device> log_probs(logits.extents(), uninitialized);
  primitives<Device>::log_softmax_rows(log_probs.data(), logits.data(), rows, width);
  if constexpr (std::is_same_v<A, float>) {
    memory<Device>::copy_to_host(out.data(), log_probs.data(), log_probs.bytes());
  } else {
    const auto host = to_host(log_probs);
    std::copy_n(host.data(), host.size(), out.begin());
  }
}

}  // namespace attn::decode
