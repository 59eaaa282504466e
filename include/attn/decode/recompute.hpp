// Decoding without a cache: each step runs the decoder over every hypothesis's whole prefix,
// as training does (teacher forcing). Slower by a factor of the length; the reference that
// kv_cache_decoder is tested against.
#pragma once

#include <span>
#include <vector>

#include "../nn/transformer.hpp"
#include "model_rows.hpp"
#include "search.hpp"

namespace attn::decode {

/// A next_token_scorer over a Transformer that recomputes the decoder over the whole prefix.
template <class T, class C>
class recomputing_decoder {
  using A = nn::activation_t<T>;

 public:
  recomputing_decoder(const nn::transformer<T, C>& model, std::span<const std::vector<token>> sources, token eos)
      : model_(model),
        source_(source_batch(sources, model.pad(), eos)),
        memory_(model.encode(nn::inference(), source_)),
        prefixes_(index_t(sources.size()), index_t{0}) {}

  /// The decoder keeps a reference to the model: a temporary one would not outlive it.
  recomputing_decoder(nn::transformer<T, C>&&, std::span<const std::vector<token>>, token) = delete;

  index_t vocabulary_size() const { return model_.vocabulary_size(); }

  /// Extends every row by last[row] and writes the next token's log-probabilities.
  void score(std::span<const token> last, std::vector<float>& log_probs) {
    const index_t rows = prefixes_.template extent<nn::batch>();
    if (index_t(last.size()) != rows) throw std::invalid_argument("attn::decode::recomputing_decoder::score: " + std::to_string(last.size()) +
                                  " tokens for " + std::to_string(rows) + " rows; one token a row is needed");
    const index_t length = prefixes_.template extent<nn::tgt>();
    tensor<nn::token, shape<nn::batch, nn::tgt>> grown(rows, length + 1);
    for (index_t r = 0; r < rows; ++r) {
      for (index_t i = 0; i < length; ++i) grown(r, i) = prefixes_(r, i);
      grown(r, length) = last[std::size_t(r)];
    }
    prefixes_ = std::move(grown);
    const auto ctx = nn::inference();
    const auto states = model_.decode(ctx, memory_, source_, prefixes_);
    const grad::variable<A, shape<nn::batch, nn::tgt, typename C::d_model>> newest(
        slice<nn::tgt>(states.value(), length, 1));
    next_token_log_probs(model_.embedding_layers().logits(ctx, newest).value(), log_probs);
  }

  /// New row i continues old row rows[i].
  void keep(std::span<const index_t> rows) {
    source_ = keep_rows(source_, rows);
    memory_ = grad::variable<A, shape<nn::batch, nn::src, typename C::d_model>>(keep_rows(memory_.value(), rows));
    prefixes_ = keep_rows(prefixes_, rows);
  }

 private:
  const nn::transformer<T, C>& model_;
  tensor<nn::token, shape<nn::batch, nn::src>> source_;
  grad::variable<A, shape<nn::batch, nn::src, typename C::d_model>> memory_;
  tensor<nn::token, shape<nn::batch, nn::tgt>> prefixes_;  // start symbol and tokens so far, a row each
};

}  // namespace attn::decode
