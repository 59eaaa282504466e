// grad::fused_attention: gradient checks (double) with padding, causal masks, a rule and grouped
// key/value heads, and equality with the unfused composition of eq. (1) (products and a masked
// softmax), values and gradients; score modifications with learned inputs (ALiBi's slopes, a
// soft cap) against grad::map on the whole score matrix, and by central differences.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <attn/attn.hpp>

#include "gradcheck.hpp"

namespace {

using namespace attn;
using test::check_gradients;
using test::random_input;
using test::target;

using B = dim<"batch">;
using L = dim<"len">;
using K = dim<"keys">;
using H = dim<"heads", 4>;
using G = dim<"kv_heads", 2>;
using DK = dim<"d_k", 3>;
using DV = dim<"d_v", 2>;

struct within_two {
  bool operator()(index_t query, index_t key) const { return std::abs(query - key) <= 2; }
};

TEST_CASE("grad::fused_attention passes gradient checks: padding, causal, a rule, grouped heads") {
  auto q = random_input<shape<B, H, L, DK>>(2, 5);
  auto k = random_input<shape<B, G, K, DK>>(2, 7);
  auto v = random_input<shape<B, G, K, DV>>(2, 7);
  tensor<index_t, shape<B>> lengths(2);
  lengths(0) = 7;
  lengths(1) = 4;
  tensor<double, shape<B, H, L, DV>> r(2, 5);
  test::fill_random(r);
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    const grad::key_visibility<B, cpu> visible{&lengths, causal, 2};  // queries at positions 2 … 6
    auto loss_of = [&](grad::tape* t) {
      return test::weighted_sum(t, grad::fused_attention(t, q, k, v, visible, 0.7, nullptr, within_two{}), r);
    };
    const auto report = check_gradients(loss_of, {target("q", q), target("k", k), target("v", v)});
    INFO(report.where);
    CHECK(report.worst < 1e-7);
  }
}

TEST_CASE("grad::fused_attention equals products and a masked softmax, values and gradients") {
  using HK = dim<"heads", 4>;  // as many key/value heads as query heads, for the unfused path
  auto q = random_input<shape<B, H, L, DK>>(3, 6);
  auto k = random_input<shape<B, HK, K, DK>>(3, 6);
  auto v = random_input<shape<B, HK, K, DV>>(3, 6);
  tensor<index_t, shape<B>> lengths(3);
  lengths(0) = 6, lengths(1) = 3, lengths(2) = 5;
  tensor<double, shape<B, L, K>> mask(3, 6, 6);  // the same visibility as an additive bias
  for (index_t b = 0; b < 3; ++b)
    for (index_t i = 0; i < 6; ++i)
      for (index_t j = 0; j < 6; ++j) mask(b, i, j) = j < lengths(b) && j <= i ? 0.0 : nn::masked<double>;
  tensor<double, shape<B, H, L, DV>> r(3, 6);
  test::fill_random(r);
  const double scale = 1 / std::sqrt(3.0);

  const auto values = [](const auto& x) { return std::vector<double>(x.data(), x.data() + x.size()); };
  enum class path { unfused, fused_lengths_causal, fused_bias };
  const auto run = [&](path how) {
    q.clear_grad();
    k.clear_grad();
    v.clear_grad();
    grad::tape t;
    auto out = how == path::fused_lengths_causal
                   ? grad::fused_attention(&t, q, k, v, grad::key_visibility<B, cpu>{&lengths, true}, scale)
               : how == path::fused_bias
                   ? grad::fused_attention(&t, q, k, v, grad::key_visibility<B, cpu>{}, scale, &mask)
                   : grad::product<K>(&t, grad::softmax<K>(&t, grad::product<DK>(&t, q, k), scale, mask), v);
    grad::backward(t, test::weighted_sum(&t, out, r));
    return std::vector{values(out.value()), values(q.grad()), values(k.grad()), values(v.grad())};
  };
  const auto expected = run(path::unfused);
  for (path how : {path::fused_lengths_causal, path::fused_bias}) {
    const auto got = run(how);
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);  // out, d_q, d_k, d_v
      CHECK(test::relative_error(got[i].data(), expected[i]) < 1e-12);
    }
  }
}

/// A window of |i − j| ≤ 2 with one global key, the first: no band.
struct window_and_first_key {
  bool operator()(index_t query, index_t key) const { return key == 0 || std::abs(query - key) <= 2; }
};

TEST_CASE("grad::fused_attention asks a rule given as an expression a pair at a time, as it asks a callable") {
  // Queries at positions 40 … 189 and keys past a tile's width; the second sentence's keys end early.
  const index_t first = 40, queries = 150, length = 230;
  auto q = random_input<shape<B, H, L, DK>>(2, queries);
  auto k = random_input<shape<B, G, K, DK>>(2, length);
  auto v = random_input<shape<B, G, K, DV>>(2, length);
  tensor<index_t, shape<B>> lengths(2);
  lengths(0) = length;
  lengths(1) = 170;
  tensor<double, shape<B, H, L, DV>> r(2, queries);
  test::fill_random(r);
  const auto values = [](const auto& x) { return std::vector<double>(x.data(), x.data() + x.size()); };
  const auto run = [&](const auto& rule, bool causal) {
    q.clear_grad();
    k.clear_grad();
    v.clear_grad();
    grad::tape t;
    const grad::key_visibility<B, cpu> visible{&lengths, causal, first};
    auto out = grad::fused_attention(&t, q, k, v, visible, 0.6, nullptr, rule);
    grad::backward(t, test::weighted_sum(&t, out, r));
    return std::vector{values(out.value()), values(q.grad()), values(k.grad()), values(v.grad())};
  };
  // The pairs [1, positions, keys]: the kernel asks about (0, position, key).
  const auto rule_of = [&](const auto& allowed) {
    return grad::pair_rule{grad::over_pairs<double, B, L, K>(allowed, first + queries, length)};
  };
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    // The same pairs visible, the same tiles walked: the same bits.
    CHECK(run(rule_of([](const auto& query, const auto& key) { return min(key, abs(query - key) - 2.0) <= 0.0; }),
              causal) == run(window_and_first_key{}, causal));
    // A band walks the tiles from its first key (the CPU kernel's tiles start there), the
    // expression's spans from the first block of 64 keys its bounds do not hide: the same
    // pairs, summed in tiles cut at other keys.
    const auto band = run(key_band{-20, 20}, causal);
    const auto expression =
        run(rule_of([](const auto& query, const auto& key) { return abs(query - key) <= 20.0; }), causal);
    for (std::size_t part = 0; part < band.size(); ++part) {
      CAPTURE(part);  // out, d_q, d_k, d_v
      CHECK(test::relative_error(expression[part].data(), band[part]) < 1e-14);
    }
  }
}

TEST_CASE("grad::pair_rule's spans, from its expression's bounds, hold every pair it allows") {
  constexpr index_t positions = 300, keys = 260;
  const auto rule_of = [](const auto& allowed) {
    return grad::pair_rule{grad::over_pairs<double, B, L, K>(allowed, positions, keys)};
  };
  const auto band = rule_of([](const auto& i, const auto& j) { return abs(j - i - 10.0) <= 30.0; });  // i − 20 … i + 40
  const auto window_and_first_key = rule_of([](const auto& i, const auto& j) { return min(j, abs(i - j) - 2.0) <= 0.0; });
  const index_t g = decltype(band)::block;
  for (const index_t first : {index_t{0}, index_t{37}, index_t{128}, index_t{250}})
    for (const index_t rows : {index_t{1}, index_t{64}, index_t{128}}) {
      const index_t last = std::min(first + rows, positions) - 1;
      CAPTURE(first);
      CAPTURE(last);
      const auto check = [&](const auto& rule, index_span within) {
        const index_span seen = rule.keys_seen(first, last);
        for (index_t i = first; i <= last; ++i)
          for (index_t j = 0; j < keys; ++j)
            if (rule(i, j)) CHECK((j >= seen.begin && j < seen.end));
        // No wider than the band's own span, to the blocks.
        CHECK(seen.begin >= within.begin - within.begin % g);
        CHECK(seen.end <= within.end + g);
        const index_span seeing = rule.positions_seeing(first, last);  // first … last as keys
        for (index_t j = first; j <= std::min(last, keys - 1); ++j)
          for (index_t i = 0; i < positions; ++i)
            if (rule(i, j)) CHECK((i >= seeing.begin && i < seeing.end));
      };
      check(band, {std::max<index_t>(0, first - 20), std::min(keys, last + 41)});
      check(window_and_first_key, {0, std::min(keys, last + 3)});
    }
  // A block inside the band is allowed whole; one across its edge is not.
  CHECK(band.allows_every(100, 110, 95, 130));
  CHECK_FALSE(band.allows_every(100, 110, 75, 130));
  CHECK_FALSE(window_and_first_key.allows_every(100, 110, 0, 5));
}

TEST_CASE("grad::fused_attention refuses a pair rule whose expression covers too few pairs") {
  auto q = random_input<shape<B, H, L, DK>>(1, 6);
  auto k = random_input<shape<B, G, K, DK>>(1, 8);
  const auto rule_over = [](index_t positions, index_t keys) {
    return grad::pair_rule{grad::over_pairs<double, B, L, K>(
        [](const auto& query, const auto& key) { return abs(query - key) <= 2.0; }, positions, keys)};
  };
  const grad::key_visibility<B, cpu> from_three{nullptr, false, 3};  // positions 3 … 8
  CHECK_NOTHROW(grad::fused_attention(nullptr, q, k, k, from_three, 0.5, nullptr, rule_over(9, 8)));
  CHECK_THROWS_WITH_AS(grad::fused_attention(nullptr, q, k, k, from_three, 0.5, nullptr, rule_over(6, 8)),
                       doctest::Contains("covers 6 positions and 8 keys, fewer than the 9 positions"),
                       std::invalid_argument);
  CHECK_THROWS_AS(grad::fused_attention(nullptr, q, k, k, from_three, 0.5, nullptr, rule_over(9, 7)),
                  std::invalid_argument);
}

/// A pair_rule that remembers the farthest pair (|key − query|) it was asked about, its spans
/// and whole-tile answers its own.
template <class Rule>
struct watched_pairs {
  Rule rule;
  std::atomic<index_t>* farthest;
  bool operator()(index_t query, index_t key) const {
    const index_t distance = std::abs(key - query);
    index_t seen = farthest->load();
    while (distance > seen && !farthest->compare_exchange_weak(seen, distance)) {
    }
    return rule(query, key);
  }
  index_span keys_seen(index_t first, index_t last) const { return rule.keys_seen(first, last); }
  index_span positions_seeing(index_t first, index_t last) const { return rule.positions_seeing(first, last); }
  bool allows_every(index_t a, index_t b, index_t c, index_t d) const { return rule.allows_every(a, b, c, d); }
};

TEST_CASE("grad::fused_attention walks only the tiles a pair rule's spans reach, forward and backward") {
  const index_t length = 1500;
  auto q = random_input<shape<B, H, L, DK>>(1, length);
  auto k = random_input<shape<B, G, K, DK>>(1, length);
  auto v = random_input<shape<B, G, K, DV>>(1, length);
  tensor<double, shape<B, H, L, DV>> r(1, length);
  test::fill_random(r);
  std::atomic<index_t> farthest{0};
  const watched_pairs rule{grad::pair_rule{grad::over_pairs<double, B, L, K>(
                               [](const auto& query, const auto& key) { return abs(query - key) <= 8.0; }, length, length)},
                           &farthest};
  grad::tape t;
  const auto out = grad::fused_attention(&t, q, k, v, grad::key_visibility<B, cpu>{}, 0.5, nullptr, rule);
  grad::backward(t, test::weighted_sum(&t, out, r));
  // Pairs of the tiles the band's blocks touch alone: within a block, a query tile and a key
  // tile of the band; without spans, every pair of the 1500 would be asked.
  CHECK(farthest.load() <= 8 + decltype(rule.rule)::block + fused_attention<cpu>::query_tile +
                               fused_attention<cpu>::key_tile);
  CHECK(farthest.load() >= 8);
}

/// ALiBi's bias (learned slopes a head) and a soft cap (learned, a head), as variants write them.
const auto alibi_bias = [](const auto& s, const auto& slopes) {
  return s - broadcast_like(slopes, s) * abs(index_along<L>(s, 2.0) - index_along<K>(s));
};
const auto soft_cap = [](const auto& s, const auto& cap) {
  return broadcast_like(cap, s) * tanh(s / broadcast_like(cap, s));
};

TEST_CASE("grad::fused_attention with a score modification equals grad::map on the scores, learned inputs included") {
  using HK = dim<"heads", 4>;
  auto q = random_input<shape<B, H, L, DK>>(3, 130);  // across a 128-query tile's edge
  auto k = random_input<shape<B, HK, K, DK>>(3, 131);
  auto v = random_input<shape<B, HK, K, DV>>(3, 131);
  auto slopes = random_input<shape<H>>();
  auto cap = random_input<shape<H>>();
  for (index_t h = 0; h < 4; ++h) cap.value()(h) = 0.5 + 0.25 * double(h);  // scores reach past the cap
  tensor<index_t, shape<B>> lengths(3);
  lengths(0) = 131, lengths(1) = 30, lengths(2) = 129;
  tensor<double, shape<B, L, K>> mask(3, 130, 131);
  for (index_t b = 0; b < 3; ++b)
    for (index_t i = 0; i < 130; ++i)
      for (index_t j = 0; j < 131; ++j) mask(b, i, j) = j < lengths(b) && j <= i + 2 ? 0.0 : nn::masked<double>;
  tensor<double, shape<B, H, L, DV>> r(3, 130);
  test::fill_random(r);
  const double scale = 1.5;  // large scores, so that the cap bends them

  const auto values = [](const auto& x) { return std::vector<double>(x.data(), x.data() + x.size()); };
  for (bool capped : {false, true}) {
    CAPTURE(capped);
    auto& input = capped ? cap : slopes;
    const auto run = [&](bool fused) {
      q.clear_grad();
      input.clear_grad();
      k.clear_grad();
      v.clear_grad();
      grad::tape t;
      auto out = [&] {
        if (fused) {
          const grad::key_visibility<B, cpu> visible{&lengths, true, 2};
          return capped ? grad::fused_attention(&t, q, k, v, visible, scale, nullptr, every_pair{},
                                                grad::modify_scores(soft_cap, input))
                        : grad::fused_attention(&t, q, k, v, visible, scale, nullptr, every_pair{},
                                                grad::modify_scores(alibi_bias, input));
        }
        auto scores = grad::product<DK>(&t, q, k);
        auto modified = capped ? grad::map(&t, [&](const auto& s, const auto& x) { return soft_cap(s * scale, x); },
                                           scores, input)
                               : grad::map(&t, [&](const auto& s, const auto& x) { return alibi_bias(s * scale, x); },
                                           scores, input);
        return grad::product<K>(&t, grad::softmax<K>(&t, modified, 1.0, mask), v);
      }();
      grad::backward(t, test::weighted_sum(&t, out, r));
      return std::vector{values(out.value()), values(q.grad()), values(k.grad()), values(v.grad()),
                         values(input.grad())};
    };
    const auto expected = run(false);
    const auto got = run(true);
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);  // out, d_q, d_k, d_v, the modification's input
      CHECK(test::relative_error(got[i].data(), expected[i]) < 1e-12);
    }
  }
}

TEST_CASE("grad::fused_attention with a modification passes gradient checks; constants get no gradient") {
  auto q = random_input<shape<B, H, L, DK>>(2, 5);
  auto k = random_input<shape<B, G, K, DK>>(2, 7);
  auto v = random_input<shape<B, G, K, DV>>(2, 7);
  auto slopes = random_input<shape<H>>();
  auto cap = random_input<shape<H>>();
  for (index_t h = 0; h < 4; ++h) cap.value()(h) = 0.4 + 0.2 * double(h);
  tensor<index_t, shape<B>> lengths(2);
  lengths(0) = 7;
  lengths(1) = 4;
  tensor<double, shape<B, H, L, DV>> r(2, 5);
  test::fill_random(r);
  const grad::key_visibility<B, cpu> visible{&lengths, false, 2};
  auto both = [](const auto& s, const auto& m, const auto& c) {
    const auto biased = s - broadcast_like(m, s) * abs(index_along<L>(s, 2.0) - index_along<K>(s));
    return broadcast_like(c, s) * tanh(biased / broadcast_like(c, s));
  };
  auto loss_of = [&](grad::tape* t) {
    return test::weighted_sum(
        t, grad::fused_attention(t, q, k, v, visible, 2.0, nullptr, within_two{}, grad::modify_scores(both, slopes, cap)),
        r);
  };
  const auto report = check_gradients(
      loss_of, {target("q", q), target("k", k), target("v", v), target("slopes", slopes), target("cap", cap)});
  INFO(report.where);
  CHECK(report.worst < 1e-7);

  // A constant input (fixed ALiBi slopes): no gradient asked for, none computed.
  const grad::variable<double, shape<H>> fixed(tensor<double, shape<H>>(slopes.value()));
  grad::tape t;
  grad::backward(t, test::weighted_sum(&t, grad::fused_attention(&t, q, k, v, visible, 2.0, nullptr, every_pair{},
                                                                  grad::modify_scores(alibi_bias, fixed)),
                                       r));
  CHECK_FALSE(fixed.has_grad());
}

#ifdef _OPENMP
TEST_CASE("grad::fused_attention: a learned input's gradient is the same bits on one thread and on every thread") {
  // 3 sentences × 2 key/value heads × 3 key tiles: 18 tasks of the backward, each with its own
  // sums of the slopes' gradient.
  auto q = random_input<shape<B, H, L, DK>>(3, 330);
  auto k = random_input<shape<B, G, K, DK>>(3, 330);
  auto v = random_input<shape<B, G, K, DV>>(3, 330);
  auto slopes = random_input<shape<H>>();
  tensor<double, shape<B, H, L, DV>> r(3, 330);
  test::fill_random(r);
  const auto gradients = [&] {
    q.clear_grad();
    slopes.clear_grad();
    grad::tape t;
    grad::backward(t, test::weighted_sum(&t, grad::fused_attention(&t, q, k, v, grad::key_visibility<B, cpu>{nullptr, true},
                                                                    0.5, nullptr, every_pair{},
                                                                    grad::modify_scores(alibi_bias, slopes)),
                                         r));
    return std::vector<double>(slopes.grad().data(), slopes.grad().data() + slopes.grad().size());
  };
  const auto many = gradients();
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = gradients();
  omp_set_num_threads(threads);
  CHECK(many == one);
}
#endif

TEST_CASE("grad::fused_attention drops the weights grad::dropout drops, from the same numbers") {
  using HK = dim<"heads", 4>;
  auto q = random_input<shape<B, H, L, DK>>(2, 130);
  auto k = random_input<shape<B, HK, K, DK>>(2, 131);
  auto v = random_input<shape<B, HK, K, DV>>(2, 131);
  tensor<index_t, shape<B>> lengths(2);
  lengths(0) = 131, lengths(1) = 40;
  tensor<double, shape<B, L, K>> mask(2, 130, 131);
  for (index_t b = 0; b < 2; ++b)
    for (index_t i = 0; i < 130; ++i)
      for (index_t j = 0; j < 131; ++j) mask(b, i, j) = j < lengths(b) ? 0.0 : nn::masked<double>;
  tensor<double, shape<B, H, L, DV>> r(2, 130);
  test::fill_random(r);
  const double scale = 0.6, p = 0.3;

  const auto values = [](const auto& x) { return std::vector<double>(x.data(), x.data() + x.size()); };
  const auto run = [&](bool fused) {
    q.clear_grad();
    k.clear_grad();
    v.clear_grad();
    random_stream stream(7, 1000);  // part-way through a stream, as in training
    grad::tape t;
    auto out = fused ? grad::fused_attention(&t, q, k, v, grad::key_visibility<B, cpu>{&lengths}, scale, nullptr,
                                             every_pair{}, unmodified{}, grad::weight_dropout{p, &stream})
                     : grad::product<K>(&t, grad::dropout(&t, grad::softmax<K>(&t, grad::product<DK>(&t, q, k), scale, mask), p, stream), v);
    grad::backward(t, test::weighted_sum(&t, out, r));
    return std::vector{values(out.value()), values(q.grad()), values(k.grad()), values(v.grad()),
                       std::vector<double>{double(stream.position())}};
  };
  const auto expected = run(false);
  const auto got = run(true);
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);  // out, d_q, d_k, d_v, the stream's position after
    CHECK(test::relative_error(got[i].data(), expected[i]) < 1e-12);
  }
  // Some weights were dropped: without dropout the output differs.
  grad::tape t;
  const auto undropped = grad::fused_attention(&t, q, k, v, grad::key_visibility<B, cpu>{&lengths}, scale);
  CHECK(test::relative_error(undropped.value().data(), expected[0]) > 0.1);
}

TEST_CASE("grad::fused_attention_in_rows gives fused_attention's numbers on the heads split apart, and passes "
          "gradient checks") {
  // Widths of the heads side by side: 4 query heads and 2 key/value heads of d_k 3, d_v 2.
  using QW = dim<"query_width", 12>;
  using KW = dim<"key_width", 6>;
  using VW = dim<"value_width", 4>;
  using W = dim<"output_width", 8>;
  auto q = random_input<shape<B, L, QW>>(3, 130);  // across a 128-query tile's edge
  auto k = random_input<shape<B, K, KW>>(3, 131);
  auto v = random_input<shape<B, K, VW>>(3, 131);
  auto slopes = random_input<shape<H>>();
  tensor<index_t, shape<B>> lengths(3);
  lengths(0) = 131, lengths(1) = 30, lengths(2) = 129;
  tensor<double, shape<B, L, W>> r(3, 130);
  test::fill_random(r);
  const double scale = 0.6;
  const grad::key_visibility<B, cpu> visible{&lengths, true, 1};

  const auto values = [](const auto& x) { return std::vector<double>(x.data(), x.data() + x.size()); };
  const auto run = [&](bool in_rows) {
    q.clear_grad();
    k.clear_grad();
    v.clear_grad();
    slopes.clear_grad();
    random_stream stream(7, 1000);
    const grad::weight_dropout dropout{0.2, &stream};
    grad::tape t;
    const auto modification = grad::modify_scores(alibi_bias, slopes);
    auto out = [&] {
      if (in_rows)
        return grad::fused_attention_in_rows<H, W>(&t, {4, 2}, q, k, v, visible, scale, nullptr, every_pair{},
                                                   modification, dropout);
      auto split = grad::fused_attention(&t, grad::split_heads<H, DK, L>(&t, q), grad::split_heads<G, DK, K>(&t, k),
                                         grad::split_heads<G, DV, K>(&t, v), visible, scale, nullptr, every_pair{},
                                         modification, dropout);
      return grad::merge_heads<W>(&t, split);
    }();
    grad::backward(t, test::weighted_sum(&t, out, r));
    return std::vector{values(out.value()), values(q.grad()), values(k.grad()), values(v.grad()),
                       values(slopes.grad())};
  };
  const auto expected = run(false);
  const auto got = run(true);
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);  // out, d_q, d_k, d_v, d_slopes: the same kernel on the same numbers
    CHECK(got[i] == expected[i]);
  }

  auto small_q = random_input<shape<B, L, QW>>(2, 5);
  auto small_k = random_input<shape<B, K, KW>>(2, 7);
  auto small_v = random_input<shape<B, K, VW>>(2, 7);
  tensor<index_t, shape<B>> small_lengths(2);
  small_lengths(0) = 7, small_lengths(1) = 4;
  tensor<double, shape<B, L, W>> small_r(2, 5);
  test::fill_random(small_r);
  const auto loss_of = [&](grad::tape* t) {
    return test::weighted_sum(t,
                              grad::fused_attention_in_rows<H, W>(t, {4, 2}, small_q, small_k, small_v,
                                                                  {&small_lengths, true, 2}, 0.7, nullptr,
                                                                  within_two{}),
                              small_r);
  };
  const auto report = check_gradients(loss_of, {target("q", small_q), target("k", small_k), target("v", small_v)});
  INFO(report.where);
  CHECK(report.worst < 1e-7);
}

TEST_CASE("grad::fused_attention_in_rows refuses widths that do not split into the heads") {
  using QW = dim<"query_width">;
  using KW = dim<"key_width">;
  using W = dim<"output_width">;
  const auto q = random_input<shape<B, L, QW>>(1, 3, 12);
  const auto k = random_input<shape<B, K, KW>>(1, 4, 6);
  const auto odd = random_input<shape<B, K, KW>>(1, 4, 7);
  const auto wide = random_input<shape<B, K, KW>>(1, 4, 8);
  const auto three_heads = random_input<shape<B, K, KW>>(1, 4, 9);
  const auto values = random_input<shape<B, K, dim<"value_width">>>(1, 4, 4);
  const auto attend = [&](const auto& keys, const auto& values, index_t heads, index_t kv_heads) {
    return grad::fused_attention_in_rows<H, W>(nullptr, {heads, kv_heads}, q, keys, values, {}, 0.5);
  };
  CHECK_NOTHROW(attend(k, k, 4, 2));
  CHECK_THROWS_WITH_AS(attend(odd, odd, 4, 2), doctest::Contains("7 columns do not split into 2 heads"), extent_error);
  CHECK_THROWS_WITH_AS(attend(wide, values, 4, 2),
                       doctest::Contains("8 columns make 2 key heads of 4, not of the queries' 3"), extent_error);
  CHECK_THROWS_WITH_AS(attend(three_heads, three_heads, 4, 3), doctest::Contains("4 query heads cannot share 3"),
                       extent_error);
  CHECK_THROWS_WITH_AS(attend(k, k, 2, 1), doctest::Contains("2 heads, but their axis holds 4"), extent_error);
}

}  // namespace
