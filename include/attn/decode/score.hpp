// Teacher-forced scoring: the log-probability a model gives to given output sentences, as
// fairseq's --score-reference, marian-scorer and CTranslate2's score_batch report it.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "search.hpp"

namespace attn::decode {

/// log P(targets[s], end symbol | source s) for every sentence s, read from the same scorer a
/// search uses, so that a search's hypothesis and the scoring of its tokens agree to rounding.
/// Row s of the scorer must hold sentence s with an empty prefix. The results have the given
/// tokens, their log-probability and the search's length-normalised score
/// (log_prob / length_penalty(tokens + end symbol)). A target token the search could never
/// output (padding, the start or end symbol, an id outside the vocabulary) is an error.
template <next_token_scorer Scorer>
std::vector<hypothesis> score_targets(Scorer& scorer, std::span<const std::vector<token>> targets,
                                      const search_options& options) {
  const index_t vocabulary = scorer.vocabulary_size();
  std::vector<hypothesis> results(targets.size());
  for (std::size_t s = 0; s < targets.size(); ++s) {
    for (const token t : targets[s])
      if (t < 0 || t >= token(vocabulary) || !options.may_output(t) || t == options.eos)
        throw std::invalid_argument("attn::decode::score_targets: target sentence " + std::to_string(s + 1) +
                                    " (of this batch) holds token " + std::to_string(t) +
                                    ", which no search outputs (vocabulary of " + std::to_string(vocabulary) + ")");
    results[s].tokens = targets[s];
  }

  std::vector<std::size_t> sentence_of(targets.size());  // the sentence of each live row
  for (std::size_t s = 0; s < targets.size(); ++s) sentence_of[s] = s;
  std::vector<token> last(targets.size(), options.bos);
  std::vector<float> log_probs;
  std::vector<index_t> kept;
  for (std::size_t position = 0; !sentence_of.empty(); ++position) {
    scorer.score(last, log_probs);
    kept.clear();
    std::vector<std::size_t> live;
    std::vector<token> next;
    for (std::size_t row = 0; row < sentence_of.size(); ++row) {
      hypothesis& h = results[sentence_of[row]];
      const bool ends = position == h.tokens.size();
      const token t = ends ? options.eos : h.tokens[position];
      h.log_prob += double(log_probs[row * std::size_t(vocabulary) + std::size_t(t)]);
      if (ends) {
        h.score = h.log_prob / length_penalty(h.tokens.size() + 1, options.alpha);
      } else {
        kept.push_back(index_t(row));
        live.push_back(sentence_of[row]);
        next.push_back(t);
      }
    }
    sentence_of = std::move(live);
    last = std::move(next);
    if (!sentence_of.empty()) scorer.keep(kept);
  }
  return results;
}

}  // namespace attn::decode
