// Incremental decoding with a key/value cache: each step runs the decoder on one new position
// per hypothesis. Self-attention keys and values of earlier positions are kept, and the
// encoder-decoder keys and values are computed once per sentence, so a step costs in
// proportion to one position, not to the whole prefix.
#pragma once

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../nn/transformer.hpp"
#include "model_rows.hpp"
#include "search.hpp"

namespace attn::decode {

/// A next_token_scorer over a Transformer that keeps every layer's keys and values on the
/// model's device; only token ids go there and log-probabilities come back.
template <class T, class C, class Device = cpu>
class kv_cache_decoder {
  using attention = nn::multi_head_attention<T, C, Device>;
  using keys_type = typename attention::template key_heads<nn::batch>;
  using values_type = typename attention::template value_heads<nn::batch>;
  using key_tensor = typename keys_type::tensor_type;
  using value_tensor = typename values_type::tensor_type;
  using mask_type = nn::attention_mask<nn::activation_t<T>, nn::batch, nn::tgt, Device>;

 public:
  /// Encodes `sources` (token ids without the end symbol, which is added) once. `ctx` may carry
  /// an attention record; it never carries a tape.
  kv_cache_decoder(const nn::transformer<T, C, Device>& model, std::span<const std::vector<token>> sources, token eos,
                   nn::context ctx = nn::inference())
      : model_(model), ctx_(ctx), rows_(index_t(sources.size())), memory_mask_(index_t{0}, index_t{1}, index_t{0}) {
    ctx_.tape = nullptr;
    ctx_.dropout = nullptr;
    source_ids_ = source_batch(sources, model.pad(), eos);
    const auto source = to_device<Device>(source_ids_);
    memory_mask_ = nn::padding_mask<nn::activation_t<T>, nn::tgt>(source, 1, model.pad());
    const auto memory = model.encode(ctx_, source);
    for (index_t row = 0; row < rows_; ++row) source_of_.push_back(row);
    for (const auto& layer : model.decoder_stack().layers) {
      auto [k, v] = layer.cross_attention.keys_and_values(ctx_, memory);
      layers_.push_back({std::move(k), std::move(v), keys_type(key_tensor(rows_, index_t{0})),
                         values_type(value_tensor(rows_, index_t{0}))});
    }
  }

  /// The decoder keeps a reference to the model: a temporary one would not outlive it.
  kv_cache_decoder(nn::transformer<T, C, Device>&&, std::span<const std::vector<token>>, token,
                   nn::context = nn::inference()) = delete;

  index_t vocabulary_size() const { return model_.vocabulary_size(); }
  /// Positions decoded so far.
  index_t steps() const { return step_; }

  /// Extends every row by last[row] and writes the next token's log-probabilities (see
  /// next_token_scorer).
  void score(std::span<const token> last, std::vector<float>& log_probs) {
    if (index_t(last.size()) != rows_)
      throw std::invalid_argument("attn::decode::kv_cache_decoder::score: " + std::to_string(last.size()) +
                                  " tokens for " + std::to_string(rows_) + " rows; one token a row is needed");
    ids_ = tensor<nn::token, shape<nn::batch, nn::tgt>, Device>(rows_, 1);
    copy_from_host<Device>(ids_.data(), last);
    const mask_type no_mask(rows_, 1, step_ + 1);  // the prefix is all visible

    auto x = model_.embedding_layers().target(ctx_, ids_, step_);
    const auto& stack = model_.decoder_stack();
    for (std::size_t i = 0; i < stack.layers.size(); ++i) {
      const auto& layer = stack.layers[i];
      auto& cache = layers_[i];
      x = layer.with_attention(
          ctx_, x,
          [&](const auto& in) {
            auto [k, v] = layer.self_attention.keys_and_values(ctx_, in);
            cache.self_keys = keys_type(extended(cache.self_keys.value(), k.value()));
            cache.self_values = values_type(extended(cache.self_values.value(), v.value()));
            return layer.self_attention.attend(ctx_, in, cache.self_keys, cache.self_values, no_mask, step_);
          },
          [&](const auto& in) {
            return layer.cross_attention.attend(ctx_, in, cache.memory_keys, cache.memory_values, memory_mask_);
          });
    }
    if constexpr (C::norm == nn::norm_placement::pre) x = stack.final_norm(ctx_, x);
    next_token_log_probs(model_.embedding_layers().logits(ctx_, x).value(), log_probs);
    cache_rows_.clear();
    ++step_;
  }

  /// New row i continues old row rows[i] (see next_token_scorer).
  void keep(std::span<const index_t> rows) {
    bool same = index_t(rows.size()) == rows_;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] < 0 || rows[i] >= rows_)
        throw std::out_of_range("attn::decode::kv_cache_decoder::keep: row " + std::to_string(rows[i]) +
                                " is out of range [0, " + std::to_string(rows_) + ")");
      same = same && rows[i] == index_t(i);
    }
    if (same) return;  // greedy search's steps where no sentence ended
    std::vector<index_t> source_of(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) source_of[i] = source_of_[std::size_t(rows[i])];
    // Beam search reorders hypotheses within their sentence at every step; the encoder's keys and
    // values of a row are its sentence's, so they move only when rows change sentence.
    const bool memory_moves = source_of != source_of_;
    if (memory_moves) {
      for (auto& cache : layers_) {
        cache.memory_keys = keys_type(keep_rows(cache.memory_keys.value(), rows));
        cache.memory_values = values_type(keep_rows(cache.memory_values.value(), rows));
      }
    }
    // The self-attention caches move with the next step's copy (extended): their rows in the
    // new order, rows[i] of the rows they hold now.
    std::vector<index_t> cache_rows(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i)
      cache_rows[i] = cache_rows_.empty() ? rows[i] : cache_rows_[std::size_t(rows[i])];
    cache_rows_ = std::move(cache_rows);
    if (memory_moves) {
      const index_t length = source_ids_.template extent<nn::src>();  // host rows: a copy, no device primitive
      tensor<nn::token, shape<nn::batch, nn::src>, cpu> kept(index_t(rows.size()), length);
      for (std::size_t i = 0; i < rows.size(); ++i)
        std::copy_n(source_ids_.data() + rows[i] * length, length, kept.data() + index_t(i) * length);
      source_ids_ = std::move(kept);
      memory_mask_ = mask_type::of_tokens(std::span<const nn::token>(source_ids_.data(), std::size_t(source_ids_.size())),
                                          index_t(rows.size()), 1, model_.pad(), false);
    }
    source_of_ = std::move(source_of);
    rows_ = index_t(rows.size());
  }

 private:
  struct layer_cache {
    keys_type memory_keys;  // encoder-decoder attention: [rows, heads, source, d_k], fixed
    values_type memory_values;
    keys_type self_keys;  // decoder self-attention: [rows, heads, positions, d_k]
    values_type self_values;
  };

  /// A self-attention cache [rows, heads, step_, depth] one position longer, in one copy: its
  /// rows in the order keep() asked for since the last step (cache_rows_; none: as they are),
  /// then `position` [rows, heads, 1, depth] after each. Dense, so that attention reads it as it
  /// is; a cache with room to grow would be copied to make the prefix dense at every step, and
  /// copied again by keep() to reorder it.
  template <class Tensor, class New>
  Tensor extended(const Tensor& cache, const New& position) const {
    using S = typename Tensor::shape_type;
    const index_t heads = attention::kv_heads::extent;
    const index_t depth = rows_ == 0 ? 0 : position.size() / (rows_ * heads);
    const index_t old_row = heads * step_ * depth, new_row = heads * (step_ + 1) * depth;
    Tensor grown(extents<S>(rows_, step_ + 1), uninitialized);
    if (step_ > 0) {
      if (cache_rows_.empty()) {
        primitives<Device>::copy_blocks(grown.data(), (step_ + 1) * depth, cache.data(), step_ * depth, step_ * depth,
                                        rows_ * heads);
      } else {
        for (index_t i = 0; i < rows_; ++i)
          primitives<Device>::copy_blocks(grown.data() + i * new_row, (step_ + 1) * depth,
                                          cache.data() + cache_rows_[std::size_t(i)] * old_row, step_ * depth,
                                          step_ * depth, heads);
      }
    }
    primitives<Device>::copy_blocks(grown.data() + step_ * depth, (step_ + 1) * depth, position.data(), depth, depth,
                                    rows_ * heads);
    return grown;
  }

  const nn::transformer<T, C, Device>& model_;
  nn::context ctx_;
  index_t rows_;
  index_t step_ = 0;
  std::vector<index_t> source_of_;  // the source sentence of each row
  std::vector<index_t> cache_rows_;  // the self-attention caches' row for each row; empty: the same row
  tensor<nn::token, shape<nn::batch, nn::src>, cpu> source_ids_{index_t{0}, index_t{0}};  // the rows' sentences, for their mask
  mask_type memory_mask_;
  tensor<nn::token, shape<nn::batch, nn::tgt>, Device> ids_{index_t{0}, index_t{1}};  // this step's tokens
  std::vector<layer_cache> layers_;
};

}  // namespace attn::decode
