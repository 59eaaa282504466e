// Scans of a row of next-token log-probabilities for the tokens a search keeps. A row is the
// vocabulary (thousands of numbers) and almost all of it loses: greedy search's running best and
// beam search's last kept extension are beaten by a few tokens of a row. So a scan jumps from one
// token that beats its threshold to the next, a block of numbers a comparison each, and looks at a
// token alone only where its block has one.
#pragma once

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "search.hpp"

namespace attn::decode {

/// The first i in [from, to) with x[i] > threshold, or `to` if none. A NaN beats no threshold,
/// and a NaN threshold is beaten by nothing, as the comparison says.
inline index_t first_above(const float* x, index_t from, index_t to, float threshold) {
  index_t i = from;
#if defined(__SSE2__)
  // 16 numbers a branch: four vector comparisons, their union, one test. (Compilers leave a
  // plain loop of comparisons scalar: the ordered > may raise an exception for NaN, and
  // std::isgreater's reduction they do not vectorise.)
  const __m128 t = _mm_set1_ps(threshold);
  for (; i + 16 <= to; i += 16) {
    const __m128 a = _mm_cmpgt_ps(_mm_loadu_ps(x + i), t), b = _mm_cmpgt_ps(_mm_loadu_ps(x + i + 4), t);
    const __m128 c = _mm_cmpgt_ps(_mm_loadu_ps(x + i + 8), t), d = _mm_cmpgt_ps(_mm_loadu_ps(x + i + 12), t);
    if (_mm_movemask_ps(_mm_or_ps(_mm_or_ps(a, b), _mm_or_ps(c, d))) != 0) break;
  }
#endif
  for (; i < to; ++i)
    if (x[i] > threshold) return i;
  return to;
}

/// The token greedy search picks from row x of `vocabulary` log-probabilities: the most probable
/// token a search may output, the lowest id among equals; as a loop over every token keeping
/// the first one that beats the best so far would pick, NaNs included (none beats a number; a
/// NaN first is never beaten). -1 if no token may be output.
inline token most_probable(const float* x, index_t vocabulary, const search_options& options) {
  index_t best = 0;
  while (best < vocabulary && !options.may_output(token(best))) ++best;
  if (best == vocabulary) return -1;
  for (index_t at = first_above(x, best + 1, vocabulary, x[best]); at < vocabulary;
       at = first_above(x, at + 1, vocabulary, x[best]))
    if (options.may_output(token(at))) best = at;
  return token(best);
}

}  // namespace attn::decode
