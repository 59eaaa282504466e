// What every search over output sentences shares (paper §6.1): its options, its results, the
// length penalty, and the scorer it asks for next-token probabilities.
#pragma once

#include <cmath>
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/shape.hpp"

namespace attn::decode {

using token = std::int32_t;

/// The paper's settings (§6.1): "beam search with a beam size of 4 and length penalty α = 0.6
/// … maximum output length … input length + 50, but terminate early when possible".
struct search_options {
  int beam = 4;
  double alpha = 0.6;
  int max_length_offset = 50;  // at most (source length + this) tokens before the end symbol
  index_t length_cap = std::numeric_limits<index_t>::max();  // and never more than this (learned positions end)
  int nbest = 1;               // hypotheses returned per sentence, best first (≤ beam)
  token bos = 2, eos = 3;      // the start symbol the decoder reads first, and the end symbol
  token pad = 0;               // padding; like the start symbol, never an output

  /// Whether a search may output token t.
  bool may_output(token t) const { return t != pad && t != bos; }

  void check() const {
    if (beam < 1) throw std::invalid_argument("beam size must be at least 1, not " + std::to_string(beam));
    if (nbest < 1 || nbest > beam)
      throw std::invalid_argument("nbest must lie in [1, beam = " + std::to_string(beam) + "], not " +
                                  std::to_string(nbest));
    if (alpha < 0) throw std::invalid_argument("the length penalty α must not be negative");
    if (max_length_offset < 0) throw std::invalid_argument("the maximum length offset must not be negative");
    if (length_cap < 0) throw std::invalid_argument("the output length cap must not be negative");
  }
};

/// A finished output sentence.
struct hypothesis {
  std::vector<token> tokens;  // without the start and end symbols
  double log_prob = 0;        // log P(tokens, end symbol | source)
  double score = 0;           // log_prob / length_penalty(tokens + end symbol)
};

/// lp(Y) = (5 + |Y|)^α / (5 + 1)^α (Wu et al. 2016, eq. (14), which §6.1 cites); |Y| counts the
/// end symbol, as the paper's tensor2tensor does.
inline double length_penalty(std::size_t length, double alpha) {
  return std::pow((5.0 + double(length)) / 6.0, alpha);
}

/// What a search asks of a model. The scorer holds rows, each the prefix of one hypothesis;
/// it starts with one row per source sentence, whose prefix is empty.
///   score(last, out): each row's prefix grows by last[row] (the start symbol at first); out
///       receives, row after row, the log-probabilities of every next token (vocabulary_size()
///       a row).
///   keep(rows): the rows that go on: new row i continues old row rows[i] (a row may be kept
///       more than once, or not at all).
template <class S>
concept next_token_scorer = requires(S& s, std::span<const token> last, std::vector<float>& out,
                                     std::span<const index_t> rows) {
  { s.vocabulary_size() } -> std::convertible_to<index_t>;
  s.score(last, out);
  s.keep(rows);
};

/// Maximum output length (end symbol not counted) for a source of `source_length` tokens.
inline index_t max_output_length(index_t source_length, const search_options& options) {
  return std::min<index_t>(source_length + options.max_length_offset, options.length_cap);
}

}  // namespace attn::decode
