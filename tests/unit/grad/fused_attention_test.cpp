// grad::fused_attention: gradient checks (double) with padding, causal masks, a rule and grouped
// key/value heads, and equality with the unfused composition of eq. (1) (products and a masked
// softmax), values and gradients; score modifications with learned inputs (ALiBi's slopes, a
// soft cap) against grad::map on the whole score matrix, and by central differences.
#include <doctest/doctest.h>

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
  using pairs = shape<B, L, K>;
  const extents<pairs> one_sentence(1, first + queries, length);
  const auto query = broadcast<pairs>(iota<double, L>(first + queries), one_sentence);
  const auto key = broadcast<pairs>(iota<double, K>(length), one_sentence);
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    // The same pairs visible, the same tiles walked: the same bits.
    CHECK(run(grad::pair_rule{min(key, abs(query - key) - 2.0) <= 0.0}, causal) ==
          run(window_and_first_key{}, causal));
    // A band walks only its tiles, from the band's first key (the CPU kernel's tiles start
    // there), the expression every tile: the same pairs, summed in another order.
    const auto band = run(key_band{-20, 20}, causal), expression = run(grad::pair_rule{abs(query - key) <= 20.0}, causal);
    for (std::size_t part = 0; part < band.size(); ++part) {
      CAPTURE(part);  // out, d_q, d_k, d_v
      CHECK(test::relative_error(expression[part].data(), band[part]) < 1e-14);
    }
  }
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

}  // namespace
