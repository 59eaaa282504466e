// The scans that searches make of a row of log-probabilities (include/attn/decode/row_scan.hpp),
// and greedy's and beam search's picks through them, against the plain loops they replaced: every
// start and end around the 16-number blocks, ties, NaNs, infinities, tokens never output.
#include <doctest/doctest.h>

#include <attn/decode/beam.hpp>
#include <attn/decode/row_scan.hpp>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace attn;
using decode::token;

namespace {

index_t first_above_by_loop(const std::vector<float>& x, index_t from, index_t to, float threshold) {
  for (index_t i = from; i < to; ++i)
    if (x[std::size_t(i)] > threshold) return i;
  return to;
}

/// Greedy search's pick before row_scan: every token in order, the first that beats the best.
token most_probable_by_loop(const std::vector<float>& x, const decode::search_options& options) {
  token best = -1;
  for (token t = 0; t < token(x.size()); ++t)
    if (options.may_output(t) && (best < 0 || x[std::size_t(t)] > x[std::size_t(best)])) best = t;
  return best;
}

/// Beam search's best_extensions before row_scan: every token compared with the last kept one.
void best_extensions_by_loop(const float* log_probs, index_t vocabulary, const decode::detail::live_hypothesis& h,
                             index_t parent, const decode::search_options& options, std::size_t count,
                             std::vector<decode::detail::candidate>& out) {
  if (count == 0) return;
  const std::size_t first = out.size();
  float threshold = -std::numeric_limits<float>::infinity();
  bool full = false;
  for (index_t v = 0; v < vocabulary; ++v) {
    const float p = log_probs[v];
    if ((full && !(p > threshold)) || !options.may_output(token(v))) continue;
    if (!full) out.emplace_back();
    std::size_t at = out.size() - 1;
    for (; at > first && log_probs[out[at - 1].next] < p; --at) out[at] = out[at - 1];
    out[at] = {h.log_prob + double(p), parent, token(v)};
    full = out.size() - first == count;
    if (full) threshold = log_probs[out.back().next];
  }
}

/// A row of n numbers from a few values, so that ties are common, with NaNs and infinities
/// where `specials` says.
std::vector<float> draw_row(std::mt19937& random, index_t n, bool specials) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x) {
    const int kind = int(random() % 40);
    if (specials && kind == 0) v = nan;
    else if (specials && kind == 1) v = -inf;
    else if (specials && kind == 2) v = inf;
    else v = -float(random() % 50) / 4.0f;
  }
  return x;
}

}  // namespace

TEST_CASE("first_above finds the first number above a threshold, as a loop does") {
  std::mt19937 random(7);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (index_t n : {0, 1, 15, 16, 17, 33, 64, 100}) {
    for (bool specials : {false, true}) {
      const auto x = draw_row(random, n, specials);
      for (index_t from = 0; from <= n; ++from)
        for (index_t to : {from, std::min(n, from + 5), std::min(n, from + 16), std::min(n, from + 17), n})
          for (float threshold : {-inf, -12.25f, -3.0f, -0.25f, 0.0f, inf, nan})
            REQUIRE(decode::first_above(x.data(), from, to, threshold) ==
                    first_above_by_loop(x, from, to, threshold));
    }
  }
}

TEST_CASE("first_above: one number above the threshold at every position of a long row") {
  std::vector<float> x(4000, -5.0f);
  for (index_t at = 0; at < 4000; at += 37) {
    x[std::size_t(at)] = -1.0f;
    CHECK(decode::first_above(x.data(), 0, 4000, -2.0f) == at);
    CHECK(decode::first_above(x.data(), at + 1, 4000, -2.0f) == 4000);
    x[std::size_t(at)] = -5.0f;
  }
}

TEST_CASE("beam search's best extensions are those the plain loop over every token keeps") {
  std::mt19937 random(13);
  decode::search_options options;
  const decode::detail::live_hypothesis h{{5, 6}, -1.5, 0};
  for (index_t n : {1, 3, 16, 17, 40, 120, 4000}) {
    for (int draw = 0; draw < 300; ++draw) {
      const auto x = draw_row(random, n, draw % 2 == 1);
      const std::size_t count = 1 + std::size_t(random() % 10);
      std::vector<decode::detail::candidate> got = {{-3.0, 1, 7}}, expected = got;  // appended after
      decode::detail::best_extensions(x.data(), n, h, 2, false, options, count, got);
      best_extensions_by_loop(x.data(), n, h, 2, options, count, expected);
      REQUIRE(got.size() == expected.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i].next == expected[i].next);
        CHECK(got[i].parent == expected[i].parent);
        CHECK(std::bit_cast<std::uint64_t>(got[i].log_prob) == std::bit_cast<std::uint64_t>(expected[i].log_prob));
      }
    }
  }
}

TEST_CASE("most_probable picks what the plain loop over every token picks") {
  std::mt19937 random(11);
  decode::search_options options;  // pad 0 and start symbol 2 are never outputs
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (index_t n : {1, 3, 4, 16, 17, 40, 257, 4000}) {
    for (int draw = 0; draw < 200; ++draw) {
      auto x = draw_row(random, n, draw % 2 == 1);
      REQUIRE(decode::most_probable(x.data(), n, options) == most_probable_by_loop(x, options));
      // The tokens that may not be output are best, or NaN; the first one that may, NaN.
      x[0] = inf;
      if (n > 2) x[2] = inf;
      REQUIRE(decode::most_probable(x.data(), n, options) == most_probable_by_loop(x, options));
      if (n > 1) x[1] = nan;
      REQUIRE(decode::most_probable(x.data(), n, options) == most_probable_by_loop(x, options));
    }
  }
  std::vector<float> only_excluded = {0.0f, -1.0f};
  options.pad = 0;
  options.bos = 1;
  CHECK(decode::most_probable(only_excluded.data(), 2, options) == -1);
}
