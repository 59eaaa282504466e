// Beam search (paper §6.1) over a batch of sentences: beam size k, the GNMT length penalty,
// a maximum output length, and an early end once k hypotheses of a sentence have finished and
// no live one outscores them.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "row_scan.hpp"
#include "search.hpp"

namespace attn::decode {

namespace detail {

/// A hypothesis still being extended, and the scorer row that holds its prefix.
struct live_hypothesis {
  std::vector<token> tokens;
  double log_prob = 0;
  index_t row = 0;
};

/// An extension of a live hypothesis by one token.
struct candidate {
  double log_prob;
  index_t parent;  // index into the sentence's live hypotheses
  token next;
};

/// Candidates in the order a search prefers them: more probable first, then earlier parent,
/// then lower token id, so that ties resolve as greedy search resolves them.
inline bool preferred(const candidate& a, const candidate& b) {
  if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
  if (a.parent != b.parent) return a.parent < b.parent;
  return a.next < b.next;
}

struct sentence_beam {
  std::vector<live_hypothesis> live;
  std::vector<hypothesis> finished;
  index_t max_length = 0;
  bool done = false;
};

/// The `count` most probable extensions of one row, appended to `out` most probable first
/// (the lower token id first among equals). Rows at the maximum length may only end; padding
/// and the start symbol are never extensions. One pass over the vocabulary that keeps the best
/// so far in order: most tokens fall below the last kept one, a block of them at a time
/// (first_above).
inline void best_extensions(const float* log_probs, index_t vocabulary, const live_hypothesis& h, index_t parent,
                            bool must_end, const search_options& options, std::size_t count,
                            std::vector<candidate>& out) {
  if (must_end) {
    out.push_back({h.log_prob + double(log_probs[options.eos]), parent, options.eos});
    return;
  }
  if (count == 0) return;
  const std::size_t first = out.size();
  // What a token must beat once `count` are kept: the last kept one's log-probability.
  float threshold = -std::numeric_limits<float>::infinity();
  bool full = false;
  for (index_t v = 0; v < vocabulary; ++v) {
    if (full && (v = first_above(log_probs, v, vocabulary, threshold)) == vocabulary) break;
    const float p = log_probs[v];
    if (!options.may_output(token(v))) continue;
    if (!full) out.emplace_back();
    std::size_t at = out.size() - 1;  // the slot freed at the end; move worse ones down into it
    for (; at > first && log_probs[out[at - 1].next] < p; --at) out[at] = out[at - 1];
    out[at] = {h.log_prob + double(p), parent, token(v)};
    full = out.size() - first == count;
    if (full) threshold = log_probs[out.back().next];
  }
}

}  // namespace detail

/// Up to options.nbest hypotheses for each source sentence, best score first.
///
/// Each step extends every live hypothesis of a sentence by every token and keeps the 2k most
/// probable extensions: those that end (with the end symbol) among the first k become finished
/// hypotheses, and the first k that do not end stay live. A sentence is done when none is live,
/// or when k of its hypotheses have finished (fairseq's rule) and the best live one, scored
/// with the length penalty of this step's finished ones, does not beat the options.nbest-th best
/// finished one (Hugging Face's heuristic compares with the worst of the k). fairseq's rule
/// alone stopped a confident model's search after k premature ends, before the sentence they
/// cut short could finish (docs/translation.md). Hypotheses at the maximum length must end.
/// The best finished hypotheses by length-normalised score are returned (log P / lp, see
/// length_penalty).
/// With k = 1 this is greedy search (the live hypothesis ranked below the end, both scored
/// at the same length); with k at least as large as every step's number of extensions it is
/// an exhaustive search.
template <next_token_scorer Scorer>
std::vector<std::vector<hypothesis>> beam_search(Scorer& scorer, std::span<const index_t> source_lengths,
                                                 const search_options& options) {
  options.check();
  const index_t vocabulary = scorer.vocabulary_size();
  const std::size_t beam = std::size_t(options.beam);
  std::vector<detail::sentence_beam> beams(source_lengths.size());
  std::vector<token> last(source_lengths.size(), options.bos);
  for (std::size_t s = 0; s < beams.size(); ++s) {
    beams[s].live.push_back({{}, 0.0, index_t(s)});
    beams[s].max_length = max_output_length(source_lengths[s], options);
  }

  std::vector<float> log_probs;
  std::vector<detail::candidate> candidates;
  std::vector<index_t> kept;
  while (!last.empty()) {
    scorer.score(last, log_probs);
    kept.clear();
    last.clear();
    for (auto& sentence : beams) {
      if (sentence.done) continue;
      candidates.clear();
      for (std::size_t i = 0; i < sentence.live.size(); ++i) {
        const auto& h = sentence.live[i];
        detail::best_extensions(log_probs.data() + h.row * vocabulary, vocabulary, h, index_t(i),
                                index_t(h.tokens.size()) >= sentence.max_length, options, 2 * beam, candidates);
      }
      const std::size_t considered = std::min(candidates.size(), 2 * beam);
      std::partial_sort(candidates.begin(), candidates.begin() + std::ptrdiff_t(considered), candidates.end(),
                        detail::preferred);

      std::vector<detail::live_hypothesis> live;
      for (std::size_t rank = 0; rank < considered; ++rank) {
        const auto& c = candidates[rank];
        const auto& parent = sentence.live[std::size_t(c.parent)];
        if (c.next == options.eos) {
          if (rank < beam)
            sentence.finished.push_back({parent.tokens, c.log_prob,
                                         c.log_prob / length_penalty(parent.tokens.size() + 1, options.alpha)});
        } else if (live.size() < beam) {
          auto& h = live.emplace_back(detail::live_hypothesis{parent.tokens, c.log_prob, 0});
          h.tokens.push_back(c.next);
          h.row = parent.row;  // the row to continue; renumbered below
        }
      }
      // live.front() is the most probable live hypothesis; this step's ends have its length. It
      // beats the nbest-th best finished score when fewer than nbest finished ones reach it.
      const auto outscores_finished = [&] {
        const auto& best = live.front();
        const double estimate = best.log_prob / length_penalty(best.tokens.size(), options.alpha);
        return std::ranges::count_if(sentence.finished, [&](const hypothesis& h) { return h.score >= estimate; }) <
               options.nbest;
      };
      if (live.empty() || (sentence.finished.size() >= beam && !outscores_finished())) {
        sentence.done = true;
        sentence.live.clear();
        continue;
      }
      for (auto& h : live) {
        kept.push_back(h.row);
        last.push_back(h.tokens.back());
        h.row = index_t(kept.size()) - 1;
      }
      sentence.live = std::move(live);
    }
    if (!last.empty()) scorer.keep(kept);
  }

  std::vector<std::vector<hypothesis>> results(beams.size());
  for (std::size_t s = 0; s < beams.size(); ++s) {
    auto& finished = beams[s].finished;
    std::stable_sort(finished.begin(), finished.end(),
                     [](const hypothesis& a, const hypothesis& b) { return a.score > b.score; });
    finished.resize(std::min(finished.size(), std::size_t(options.nbest)));
    results[s] = std::move(finished);
  }
  return results;
}

}  // namespace attn::decode
