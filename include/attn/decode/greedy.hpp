// Greedy decoding: the most probable next token, one position at a time.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "row_scan.hpp"
#include "search.hpp"

namespace attn::decode {

/// One hypothesis per source sentence: at each position the most probable token (the lowest id
/// among equals), until the end symbol or the maximum length (where the end symbol is forced).
/// source_lengths[s] is sentence s's length in tokens, for the maximum output length.
template <next_token_scorer Scorer>
std::vector<hypothesis> greedy_search(Scorer& scorer, std::span<const index_t> source_lengths,
                                      const search_options& options) {
  options.check();
  const index_t vocabulary = scorer.vocabulary_size();
  const std::size_t sentences = source_lengths.size();
  std::vector<hypothesis> results(sentences);
  std::vector<std::size_t> sentence_of(sentences);  // the sentence of each live row
  for (std::size_t s = 0; s < sentences; ++s) sentence_of[s] = s;
  std::vector<token> last(sentences, options.bos);
  std::vector<float> log_probs;
  std::vector<index_t> kept;
  while (!sentence_of.empty()) {
    scorer.score(last, log_probs);
    kept.clear();
    std::vector<std::size_t> live;
    std::vector<token> next;
    for (std::size_t row = 0; row < sentence_of.size(); ++row) {
      const float* p = log_probs.data() + row * std::size_t(vocabulary);
      hypothesis& h = results[sentence_of[row]];
      const bool at_limit = index_t(h.tokens.size()) >= max_output_length(source_lengths[sentence_of[row]], options);
      // The lowest id wins ties, the end symbol included, as in beam search.
      const token best = at_limit ? options.eos : most_probable(p, vocabulary, options);
      if (best < 0)
        throw std::invalid_argument("attn::decode::greedy_search: no token of the vocabulary of " +
                                    std::to_string(vocabulary) + " may be output (padding " +
                                    std::to_string(options.pad) + ", start symbol " + std::to_string(options.bos) + ")");
      h.log_prob += p[best];
      if (best == options.eos) {
        h.score = h.log_prob / length_penalty(h.tokens.size() + 1, options.alpha);
      } else {
        h.tokens.push_back(best);
        kept.push_back(index_t(row));
        live.push_back(sentence_of[row]);
        next.push_back(best);
      }
    }
    sentence_of = std::move(live);
    last = std::move(next);
    if (!sentence_of.empty()) scorer.keep(kept);
  }
  return results;
}

}  // namespace attn::decode
