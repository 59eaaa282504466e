// Corpus chrF as sacreBLEU computes it by default (Post, 2018, "A Call for Clarity in Reporting BLEU
// Scores"; chrF: Popović, 2015), matched against sacreBLEU 2.6.0: character n-grams up to order 6 over
// the text with its whitespace removed, no word n-grams, beta = 2, mixed case, and sacreBLEU's default
// averaging over the orders both sides have (eps_smoothing=False). tests/unit/text/sacrebleu_values.py
// prints the values the tests compare with.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ranges>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <attn/text/bleu.hpp>  // UTF-8 characters, Python's whitespace, the stream checks, number formatting

namespace attn::text {

/// A corpus chrF score with the n-gram statistics summed over the corpus, one entry per order.
struct chrf_score {
  static constexpr std::size_t char_order = 6;
  static constexpr int beta = 2;

  double score = 0.0;  ///< 0 to 100
  std::array<std::uint64_t, char_order> hypothesis_ngrams{};  ///< 0 for an order the reference lacks
  std::array<std::uint64_t, char_order> reference_ngrams{};
  std::array<std::uint64_t, char_order> matching_ngrams{};

  /// sacreBLEU's line without the signature, e.g. "chrF2 = 54.32".
  std::string format() const { return "chrF2 = " + detail::fixed_decimals(score, 2); }
};

namespace detail {

struct chrf_statistics {
  std::array<std::uint64_t, chrf_score::char_order> hypothesis{}, reference{}, matching{};
};

/// sacreBLEU's CHRF._compute_f_score with eps_smoothing=False (metrics/chrf.py), operation for
/// operation: precision and recall are averaged over the orders where both sides have n-grams, and
/// the F-score is taken of the averages, not averaged over the orders.
inline double chrf_f_score(const chrf_statistics& statistics) {
  constexpr double factor = static_cast<double>(chrf_score::beta * chrf_score::beta);
  double mean_precision = 0.0, mean_recall = 0.0;
  int effective_order = 0;
  for (std::size_t n = 0; n < chrf_score::char_order; ++n) {
    if (statistics.hypothesis[n] == 0 || statistics.reference[n] == 0) continue;
    const auto matching = static_cast<double>(statistics.matching[n]);
    mean_precision += matching / static_cast<double>(statistics.hypothesis[n]);
    mean_recall += matching / static_cast<double>(statistics.reference[n]);
    ++effective_order;
  }
  if (effective_order == 0) return 0.0;
  mean_precision /= effective_order;
  mean_recall /= effective_order;
  if (mean_precision + mean_recall == 0.0) return 0.0;
  double score = (1.0 + factor) * mean_precision * mean_recall;
  score /= factor * mean_precision + mean_recall;
  return 100.0 * score;
}

/// A text with its whitespace removed and where each of its characters starts, so that an n-gram of
/// characters (code points, as Python counts them) is a substring of it.
struct squeezed_text {
  std::string text;
  std::vector<std::size_t> char_starts;  ///< one more than there are characters: the end

  explicit squeezed_text(std::string_view line) {
    for (const std::string_view word : split_python_words(line)) text += word;
    for (std::size_t offset = 0; offset < text.size(); offset += utf8_char_at(text, offset).length)
      char_starts.push_back(offset);
    char_starts.push_back(text.size());
  }

  std::size_t chars() const noexcept { return char_starts.size() - 1; }

  ngram_counts count_ngrams(std::size_t order) const {
    ngram_counts counts;
    for (std::size_t first = 0; first + order <= chars(); ++first)
      ++counts[std::string_view(text).substr(char_starts[first], char_starts[first + order] - char_starts[first])];
    return counts;
  }
};

}  // namespace detail

/// Accumulates chrF's statistics segment by segment, so that a corpus can be scored while it streams
/// past; score() may be called at any point. As in sacreBLEU, the statistics are summed over the
/// corpus and the score is computed once from the sums.
class chrf_counter {
 public:
  static constexpr std::size_t char_order = chrf_score::char_order;

  /// Adds one segment: a hypothesis and its references (at least one), e.g. add(hyp, {ref}) or
  /// add(hyp, std::vector<std::string>{...}).
  void add(std::string_view hypothesis, std::initializer_list<std::string_view> references) {
    add_segment(hypothesis, std::vector<std::string_view>(references));
  }

  template <std::ranges::input_range References>
    requires std::convertible_to<std::ranges::range_reference_t<References>, std::string_view>
  void add(std::string_view hypothesis, const References& references) {
    std::vector<std::string_view> views;
    for (auto&& reference : references) views.emplace_back(reference);
    add_segment(hypothesis, views);
  }

  std::size_t segments() const noexcept { return segments_; }

  chrf_score score() const {
    chrf_score result;
    result.score = detail::chrf_f_score(totals_);
    result.hypothesis_ngrams = totals_.hypothesis;
    result.reference_ngrams = totals_.reference;
    result.matching_ngrams = totals_.matching;
    return result;
  }

 private:
  void add_segment(std::string_view hypothesis, const std::vector<std::string_view>& references) {
    if (references.empty()) throw std::invalid_argument("chrf_counter::add: a segment needs at least one reference");

    const detail::squeezed_text hypothesis_text(hypothesis);
    std::array<detail::ngram_counts, char_order> hypothesis_ngrams;
    for (std::size_t n = 0; n < char_order; ++n) hypothesis_ngrams[n] = hypothesis_text.count_ngrams(n + 1);

    // With several references, the segment counts with the one it has the best F-score against; the
    // first of equals (CHRF._compute_segment_statistics).
    detail::chrf_statistics best;
    double best_f_score = -1.0;
    for (const std::string_view reference : references) {
      const detail::squeezed_text reference_text(reference);
      detail::chrf_statistics statistics;
      for (std::size_t n = 0; n < char_order; ++n) {
        const detail::ngram_counts reference_ngrams = reference_text.count_ngrams(n + 1);
        std::uint64_t hypothesis_count = 0, reference_count = 0, matching_count = 0;
        for (const auto& [ngram, count] : hypothesis_ngrams[n]) {
          hypothesis_count += count;
          if (const auto found = reference_ngrams.find(ngram); found != reference_ngrams.end())
            matching_count += std::min(count, found->second);
        }
        for (const auto& [ngram, count] : reference_ngrams) reference_count += count;
        // sacreBLEU leaves out the hypothesis n-grams of an order the reference has none of (too
        // short or empty), so that the order does not count against precision.
        statistics.hypothesis[n] = reference_ngrams.empty() ? 0 : hypothesis_count;
        statistics.reference[n] = reference_count;
        statistics.matching[n] = matching_count;
      }
      if (const double f_score = detail::chrf_f_score(statistics); f_score > best_f_score) {
        best_f_score = f_score;
        best = statistics;
      }
    }
    for (std::size_t n = 0; n < char_order; ++n) {
      totals_.hypothesis[n] += best.hypothesis[n];
      totals_.reference[n] += best.reference[n];
      totals_.matching[n] += best.matching[n];
    }
    ++segments_;
  }

  detail::chrf_statistics totals_;
  std::size_t segments_ = 0;
};

/// Corpus chrF of `hypotheses` against one or more reference streams, references[k][i] being the
/// k-th reference of hypotheses[i]: sacrebleu.corpus_chrf(hypotheses, references) with its defaults.
/// Throws std::invalid_argument when there is no stream or a stream's length differs.
inline chrf_score corpus_chrf(const std::vector<std::string>& hypotheses,
                              const std::vector<std::vector<std::string>>& references) {
  detail::check_streams("corpus_chrf", hypotheses.size(), references);
  chrf_counter counter;
  std::vector<std::string_view> segment_references(references.size());
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    for (std::size_t k = 0; k < references.size(); ++k) segment_references[k] = references[k][i];
    counter.add(hypotheses[i], segment_references);
  }
  return counter.score();
}

}  // namespace attn::text
