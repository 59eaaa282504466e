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
  using activation = nn::activation_t<T>;
  using mask_type = nn::attention_mask<activation, nn::batch, nn::tgt, Device>;

 public:
  /// Encodes `sources` (token ids without the end symbol, which is added) once. `ctx` may carry
  /// an attention record; it never carries a tape.
  kv_cache_decoder(const nn::transformer<T, C, Device>& model, std::span<const std::vector<token>> sources, token eos,
                   nn::context ctx = nn::inference())
      : model_(model),
        ctx_(ctx),
        rows_(index_t(sources.size())),
        output_columns_(stored_output_columns(model)),
        memory_mask_(index_t{0}, index_t{1}, index_t{0}) {
    ctx_.tape = nullptr;
    ctx_.dropout = nullptr;
    source_ids_ = source_batch(sources, model.pad(), eos);
    const auto source = to_device<Device>(source_ids_);
    const auto memory = model.encode(ctx_, source);
    for (index_t row = 0; row < rows_; ++row) source_of_.push_back(row);
    memory_sentences_ = source_of_;
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

    // Rows that come sentence after sentence, the same number of each, attend to the encoder's
    // keys and values as that many queries of their sentence (beam search's k hypotheses):
    // one copy of them a sentence, read once, in small products rather than matrix-vector ones.
    // (Not while attention weights are recorded: the record keeps a row's weights as its own.)
    const index_t per_sentence = ctx_.attention == nullptr ? rows_per_sentence() : 0;
    if (per_sentence > 0 && memory_mask_queries_ != per_sentence) memory_mask_ = sentence_mask(per_sentence);
    std::vector<std::pair<keys_type, values_type>> row_memory;  // otherwise a copy a row, this step
    if (per_sentence == 0) {
      memory_mask_ = sentence_mask(1, true);
      const std::vector<index_t> at = rows_memory_index();
      for (const auto& cache : layers_)
        row_memory.emplace_back(keys_type(keep_rows(cache.memory_keys.value(), at)),
                                values_type(keep_rows(cache.memory_values.value(), at)));
    }

    const std::vector<index_t> cache_sources = self_cache_sources();
    auto x = model_.embedding_layers().target(ctx_, ids_, step_);
    const auto& stack = model_.decoder_stack();
    for (std::size_t i = 0; i < stack.layers.size(); ++i) {
      const auto& layer = stack.layers[i];
      auto& cache = layers_[i];
      x = layer.with_attention(
          ctx_, x,
          [&](const auto& in) {
            auto [k, v] = layer.self_attention.keys_and_values(ctx_, in);
            cache.self_keys = keys_type(extended(cache.self_keys.value(), k.value(), cache_sources));
            cache.self_values = values_type(extended(cache.self_values.value(), v.value(), cache_sources));
            return layer.self_attention.attend(ctx_, in, cache.self_keys, cache.self_values, no_mask, step_);
          },
          [&](const auto& in) {
            if (per_sentence == 0)
              return layer.cross_attention.attend(ctx_, in, row_memory[i].first, row_memory[i].second, memory_mask_);
            if (per_sentence == 1)  // greedy search: a row is a sentence
              return layer.cross_attention.attend(ctx_, in, cache.memory_keys, cache.memory_values, memory_mask_);
            using input = std::decay_t<decltype(in)>;
            const index_t sentences = rows_ / per_sentence;
            const auto queries = regrouped<input>(in, sentences, per_sentence);
            return regrouped<input>(
                layer.cross_attention.attend(ctx_, queries, cache.memory_keys, cache.memory_values, memory_mask_),
                rows_, 1);
          });
    }
    if constexpr (C::norm == nn::norm_placement::pre) x = stack.final_norm(ctx_, x);
    // The pre-softmax projection x · Eᵀ (paper §3.4), on the CPU as x · (Eᵀ stored).
    if constexpr (host_addressable<Device>)
      next_token_log_probs(tensor<activation, shape<nn::batch, nn::tgt, nn::vocab>, Device>(
                               contract<typename C::d_model>(x.value(), output_columns_)),
                           log_probs);
    else
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
    // The self-attention caches move with the next step's copy (extended): their rows in the
    // new order, rows[i] of the rows they hold now.
    std::vector<index_t> cache_rows(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i)
      cache_rows[i] = cache_rows_.empty() ? rows[i] : cache_rows_[std::size_t(rows[i])];
    cache_rows_ = std::move(cache_rows);
    source_of_ = std::move(source_of);
    rows_ = index_t(rows.size());
    // The encoder's keys and values are kept a sentence each: they move only when a sentence
    // has no row left (it finished), and then only the sentences that go on.
    std::vector<index_t> live;
    for (const index_t sentence : source_of_)
      if (std::find(live.begin(), live.end(), sentence) == live.end()) live.push_back(sentence);
    std::sort(live.begin(), live.end());
    if (live == memory_sentences_) return;
    std::vector<index_t> kept(live.size());
    for (std::size_t i = 0; i < live.size(); ++i) kept[i] = memory_index(live[i]);
    for (auto& cache : layers_) {
      cache.memory_keys = keys_type(keep_rows(cache.memory_keys.value(), kept));
      cache.memory_values = values_type(keep_rows(cache.memory_values.value(), kept));
    }
    source_ids_ = host_rows(source_ids_, kept);
    memory_sentences_ = std::move(live);
    memory_mask_queries_ = 0;  // remade for the sentences that are left
  }

 private:
  struct layer_cache {
    keys_type memory_keys;  // encoder-decoder attention: [sentences, heads, source, d_k], fixed
    values_type memory_values;
    keys_type self_keys;  // decoder self-attention: [rows, heads, positions, d_k]
    values_type self_values;
  };

  /// Where sentence `sentence` (an index into the sources) sits in the memory tensors.
  index_t memory_index(index_t sentence) const {
    return index_t(std::lower_bound(memory_sentences_.begin(), memory_sentences_.end(), sentence) -
                   memory_sentences_.begin());
  }
  /// Each row's sentence's place in the memory tensors.
  std::vector<index_t> rows_memory_index() const {
    std::vector<index_t> at(source_of_.size());
    for (std::size_t i = 0; i < at.size(); ++i) at[i] = memory_index(source_of_[i]);
    return at;
  }
  /// n when the rows are n of the memory's first sentence, then n of its second, and so on for
  /// every sentence it holds; else 0.
  index_t rows_per_sentence() const {
    const index_t sentences = index_t(memory_sentences_.size());
    if (sentences == 0 || rows_ % sentences != 0) return 0;
    const index_t n = rows_ / sentences;
    for (index_t row = 0; row < rows_; ++row)
      if (source_of_[std::size_t(row)] != memory_sentences_[std::size_t(row / n)]) return 0;
    return n;
  }
  /// The sources' padding as a mask [sentences, queries, source] for `queries` queries a
  /// sentence, or for each row's sentence (by_row, one query a row).
  mask_type sentence_mask(index_t queries, bool by_row = false) {
    memory_mask_queries_ = by_row ? 0 : queries;
    const auto ids = by_row ? host_rows(source_ids_, rows_memory_index()) : source_ids_;
    return mask_type::of_tokens(ids, queries, model_.pad(), false);
  }
  /// Rows `rows` of host token ids, in that order.
  static tensor<nn::token, shape<nn::batch, nn::src>, cpu> host_rows(const tensor<nn::token, shape<nn::batch, nn::src>, cpu>& ids,
                                                                    const std::vector<index_t>& rows) {
    const index_t length = ids.template extent<nn::src>();
    tensor<nn::token, shape<nn::batch, nn::src>, cpu> kept(index_t(rows.size()), length);
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::copy_n(ids.data() + rows[i] * length, length, kept.data() + index_t(i) * length);
    return kept;
  }
  /// The same numbers as [batch, length, d_model]: rows of one position a sentence's queries,
  /// and back.
  template <class Variable, class From>
  static Variable regrouped(const From& x, index_t batch, index_t length) {
    typename Variable::tensor_type y(extents<typename Variable::shape_type>(batch, length), uninitialized);
    memory<Device>::copy(y.data(), x.value().data(), y.bytes());
    return Variable(std::move(y));
  }

  /// The blocks (a row's head) of the self-attention caches each new block is copied from, as
  /// keep() reordered the rows since the last step; empty when it did not.
  std::vector<index_t> self_cache_sources() const {
    const index_t heads = attention::kv_heads::extent;
    std::vector<index_t> sources;
    for (const index_t row : cache_rows_)
      for (index_t h = 0; h < heads; ++h) sources.push_back(row * heads + h);
    return sources;
  }

  /// Eᵀ of the output projection, stored, on the CPU, where oneDNN multiplies a few rows by a
  /// stored matrix at twice the rate it multiplies them by a transposed one; made once a
  /// decoder (a copy of the size of the embedding table). Elsewhere nothing: cuBLAS takes the
  /// transposed operand at full rate.
  static tensor<activation, shape<typename C::d_model, nn::vocab>, Device> stored_output_columns(
      const nn::transformer<T, C, Device>& model) {
    using columns = tensor<activation, shape<typename C::d_model, nn::vocab>, Device>;
    if constexpr (host_addressable<Device>)
      return columns(permute<typename C::d_model, nn::vocab>(
          cast<activation>(model.embedding_layers().output_table().value())));
    else
      return columns(index_t{0});
  }

  /// A self-attention cache [rows, heads, step_, depth] one position longer, in one copy: its
  /// rows in the order keep() asked for since the last step (`sources`, from
  /// self_cache_sources; empty: as they are), then `position` [rows, heads, 1, depth] after
  /// each. Dense, so that attention reads it as it is; a cache with room to grow would be copied
  /// to make the prefix dense at every step, and copied again by keep() to reorder it.
  template <class Tensor, class New>
  Tensor extended(const Tensor& cache, const New& position, const std::vector<index_t>& sources) const {
    using S = typename Tensor::shape_type;
    const index_t heads = attention::kv_heads::extent;
    const index_t depth = rows_ == 0 ? 0 : position.size() / (rows_ * heads);
    Tensor grown(extents<S>(rows_, step_ + 1), uninitialized);
    if (step_ > 0) {
      primitives<Device>::copy_blocks(grown.data(), (step_ + 1) * depth, cache.data(), step_ * depth, step_ * depth,
                                      rows_ * heads, sources.empty() ? nullptr : sources.data());
    }
    primitives<Device>::copy_blocks(grown.data() + step_ * depth, (step_ + 1) * depth, position.data(), depth, depth,
                                    rows_ * heads);
    return grown;
  }

  const nn::transformer<T, C, Device>& model_;
  nn::context ctx_;
  index_t rows_;
  tensor<activation, shape<typename C::d_model, nn::vocab>, Device> output_columns_;  // stored_output_columns
  index_t step_ = 0;
  std::vector<index_t> source_of_;  // the source sentence of each row
  std::vector<index_t> memory_sentences_;  // the sentences the memory tensors hold, in order
  index_t memory_mask_queries_ = 0;  // queries a sentence memory_mask_ was made for (0: a row each)
  std::vector<index_t> cache_rows_;  // the self-attention caches' row for each row; empty: the same row
  tensor<nn::token, shape<nn::batch, nn::src>, cpu> source_ids_{index_t{0}, index_t{0}};  // memory_sentences_' ids
  mask_type memory_mask_;
  tensor<nn::token, shape<nn::batch, nn::tgt>, Device> ids_{index_t{0}, index_t{1}};  // this step's tokens
  std::vector<layer_cache> layers_;
};

}  // namespace attn::decode
