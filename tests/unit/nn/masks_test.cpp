// Attention masks (include/attn/nn/masks.hpp): the kernel's form (key counts, causal) and the
// bias say the same thing; attention reads the first where it can and builds the second only
// where it must.
#include <doctest/doctest.h>

#include <attn/attn.hpp>
#include <cmath>
#include <vector>

#include "../grad/gradcheck.hpp"
#include "micro.hpp"

// Its own namespace: unit-model compiles its files together (tests/unit/meson.build).
namespace nn_masks_test {

namespace {
using namespace attn;
using nn::batch;
using nn::keys;
using nn::src;
using nn::tgt;

struct op_config : nn::config<nn::widths<8, 12, 4, 3, 2>> {};
using heads = op_config::heads;
using d_k = op_config::d_k;
using d_v = op_config::d_v;
using mask_type = nn::attention_mask<double, batch, tgt, cpu>;

/// What §3.2.3 asks of a mask, by loops: key j of sentence b is hidden when it is padding or,
/// causal, after query i.
std::vector<double> expected_bias(const std::vector<int>& ids, index_t sentences, index_t queries, bool causal) {
  const index_t length = index_t(ids.size()) / sentences;
  std::vector<double> bias;
  for (index_t b = 0; b < sentences; ++b)
    for (index_t i = 0; i < queries; ++i)
      for (index_t j = 0; j < length; ++j)
        bias.push_back(ids[std::size_t(b * length + j)] == 0 || (causal && j > i) ? nn::masked<double> : 0.0);
  return bias;
}

std::vector<double> elements(const tensor<double, shape<batch, tgt, keys>>& t) {
  return {t.data(), t.data() + t.size()};
}

double largest_difference(const auto& a, const auto& b) {
  double worst = 0;
  for (index_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a.data()[i] - b.data()[i]));
  return worst;
}

TEST_CASE("masks: padding at the end is a key count, and the bias built from it hides the same keys") {
  const std::vector<int> ids{5, 6, 7, 2, 9, 3, 0, 0, 4, 0, 0, 0};
  const auto mask = nn::padding_mask<double, tgt>(test::tokens<src>(3, 4, {5, 6, 7, 2, 9, 3, 0, 0, 4, 0, 0, 0}), 2, 0);
  CHECK(mask.kernel_form());
  CHECK_FALSE(mask.causal());
  REQUIRE(mask.key_lengths() != nullptr);
  CHECK(std::vector<index_t>(mask.key_lengths()->data(), mask.key_lengths()->data() + 3) ==
        std::vector<index_t>{4, 2, 1});
  CHECK_FALSE(mask.has_bias());
  const mask_type copy = mask;  // layers share one mask
  CHECK(elements(mask.bias()) == expected_bias(ids, 3, 2, false));
  CHECK(copy.has_bias());
  CHECK(&copy.bias() == &mask.bias());
}

TEST_CASE("masks: the decoder's causal mask is a key count and causal; padding between tokens is a bias") {
  const std::vector<int> ids{1, 4, 8, 0, 1, 0, 0, 0};
  const auto causal = nn::causal_mask<double>(test::tokens<tgt>(2, 4, {1, 4, 8, 0, 1, 0, 0, 0}), 0);
  CHECK(causal.kernel_form());
  CHECK(causal.causal());
  CHECK(elements(causal.bias()) == expected_bias(ids, 2, 4, true));

  const std::vector<int> holes{1, 0, 8, 3, 1, 2, 0, 0};
  const auto gappy = nn::causal_mask<double>(test::tokens<tgt>(2, 4, {1, 0, 8, 3, 1, 2, 0, 0}), 0);
  CHECK_FALSE(gappy.kernel_form());
  CHECK(gappy.key_lengths() == nullptr);
  CHECK_FALSE(gappy.causal());  // the bias says it
  CHECK(elements(gappy.bias()) == expected_bias(holes, 2, 4, true));

  const mask_type open(2, 3, 5);
  CHECK(open.kernel_form());
  CHECK(open.key_lengths() == nullptr);
  CHECK(elements(open.bias()) == std::vector<double>(30, 0.0));
}

template <class V>
V make(const char* spec, nn::attention_kind kind = nn::attention_kind::decoder_self) {
  random_stream init(5);
  return nn::make_variant<V>(init, kind, nn::variant_spec::parse(spec));
}

/// Attention under a mask made from tokens, fused and unfused, and its gradients for q, k and v.
template <class V>
void check_both_paths(const V& variant, const mask_type& from_tokens, bool folds_rule = false) {
  test::rng().seed(11);
  const index_t sentences = from_tokens.sentences(), queries = from_tokens.queries(), length = from_tokens.key_count();
  auto q = test::random_input<shape<batch, heads, tgt, d_k>>(sentences, queries);
  auto k = test::random_input<shape<batch, heads, keys, d_k>>(sentences, length);
  auto v = test::random_input<shape<batch, heads, keys, d_v>>(sentences, length);
  tensor<double, shape<batch, heads, tgt, d_v>> r(sentences, queries);
  test::fill_random(r);
  const auto run = [&](const mask_type& mask, nn::attention_path path) {
    q.clear_grad();
    k.clear_grad();
    v.clear_grad();
    grad::tape t;
    const auto out = nn::variant_attention(variant, nn::context{&t, nullptr, nullptr, path}, q, k, v, mask,
                                           nn::attention_kind::decoder_self);
    grad::backward(t, test::weighted_sum(&t, out, r));
    return tensor<double, shape<batch, heads, tgt, d_v>>(out.value());
  };
  const auto gradients = [&] {
    return std::tuple{tensor<double, shape<batch, heads, tgt, d_k>>(q.grad()),
                      tensor<double, shape<batch, heads, keys, d_k>>(k.grad()),
                      tensor<double, shape<batch, heads, keys, d_v>>(v.grad())};
  };
  const auto fused = run(from_tokens, nn::attention_path::fused);
  const auto [fused_dq, fused_dk, fused_dv] = gradients();
  const bool built_for_fused = from_tokens.has_bias();
  const auto unfused = run(mask_type(from_tokens.bias()), nn::attention_path::unfused);
  const auto [dq, dk, dv] = gradients();
  CHECK(largest_difference(fused, unfused) < 1e-12);
  CHECK(largest_difference(fused_dq, dq) < 1e-12);
  CHECK(largest_difference(fused_dk, dk) < 1e-12);
  CHECK(largest_difference(fused_dv, dv) < 1e-12);
  // The fused kernel reads the key counts and a rule's kernel form or its expression, a pair
  // at a time: no [batch, queries, keys] bias unless a rule that reads more is folded in.
  CHECK(built_for_fused == folds_rule);
}

/// Restricted attention's window of 5 as an expression alone, with no kernel form: the fused
/// path asks it a pair at a time (grad::pair_rule).
template <class T, class C, class Device>
struct window_without_kernel_form {
  template <class I, class J>
  auto allowed(const I& query, const J& key) const {
    return abs(query - key) <= value_t<I>(2);
  }
};

/// The window with one global key, the first (as Longformer's global tokens): no band.
template <class T, class C, class Device>
struct window_and_first_key {
  template <class I, class J>
  auto allowed(const I& query, const J& key) const {
    return min(key, abs(query - key) - value_t<I>(2)) <= value_t<I>(0);
  }
};

/// A window that widens with the sentence's index: a rule that reads more than the pair's
/// coordinates, which the fused path folds into a bias.
template <class T, class C, class Device>
struct window_by_sentence {
  template <class I, class J>
  auto allowed(const I& query, const J& key) const {
    return abs(query - key) <= value_t<I>(1) + index_along<batch>(query);
  }
};

TEST_CASE("masks: fused attention reads key counts and causality, and equals the unfused path under the bias") {
  const auto ids = test::tokens<tgt>(3, 5, {1, 4, 8, 6, 2, 1, 9, 0, 0, 0, 1, 0, 0, 0, 0});
  const auto causal = nn::causal_mask<double>(ids, 0);
  const auto padding = nn::padding_mask<double, tgt>(ids, 5, 0);
  SUBCASE("the paper's") {
    check_both_paths(make<nn::scaled_dot_product<double, op_config, cpu>>(""), causal);
    check_both_paths(make<nn::scaled_dot_product<double, op_config, cpu>>(""), padding);
  }
  SUBCASE("ALiBi (a modification in the kernel)") {
    check_both_paths(make<nn::alibi<double, op_config, cpu>>("alibi:learned"), causal);
  }
  SUBCASE("restricted (a rule: a band of keys in the kernel, or its expression a pair at a time)") {
    // A window wide enough that every query sees a key: a row with none is 0 fused and the mean
    // of the values unfused (core/fused_attention.hpp).
    check_both_paths(make<nn::restricted<double, op_config, cpu>>("restricted:8"), causal);
    // Twelve positions and windows of |i − j| ≤ 2 (r = 5, and r = 4: ⌊r/2⌋ alike), which hide
    // most pairs; the second sentence's last position is padding, and its row still sees two keys.
    const auto twelve = test::tokens<tgt>(2, 12, {1, 4, 8, 6, 2, 7, 3, 5, 9, 4, 6, 2,  //
                                                  1, 9, 3, 8, 5, 7, 2, 6, 4, 3, 8, 0});
    const auto twelve_causal = nn::causal_mask<double>(twelve, 0);
    const auto twelve_padding = nn::padding_mask<double, tgt>(twelve, 12, 0);
    check_both_paths(make<nn::restricted<double, op_config, cpu>>("restricted:5"), twelve_causal);
    check_both_paths(make<nn::restricted<double, op_config, cpu>>("restricted:4"), twelve_padding);
    // Fresh masks: the unfused runs above built the bias of these.
    check_both_paths(make<window_without_kernel_form<double, op_config, cpu>>(""), nn::causal_mask<double>(twelve, 0));
    check_both_paths(make<window_without_kernel_form<double, op_config, cpu>>(""),
                     nn::padding_mask<double, tgt>(twelve, 12, 0));
  }
  SUBCASE("rules as expressions: asked a pair at a time, or folded into a bias when they read more") {
    const auto twelve = test::tokens<tgt>(2, 12, {1, 4, 8, 6, 2, 7, 3, 5, 9, 4, 6, 2,  //
                                                  1, 9, 3, 8, 5, 7, 2, 6, 4, 3, 0, 0});
    check_both_paths(make<window_and_first_key<double, op_config, cpu>>(""), nn::causal_mask<double>(twelve, 0));
    check_both_paths(make<window_and_first_key<double, op_config, cpu>>(""),
                     nn::padding_mask<double, tgt>(twelve, 12, 0));
    check_both_paths(make<window_by_sentence<double, op_config, cpu>>(""), nn::causal_mask<double>(twelve, 0), true);
  }
}

TEST_CASE("masks: a mask of other extents than the attention's is refused") {
  auto q = test::random_input<shape<batch, heads, tgt, d_k>>(2, 3);
  auto k = test::random_input<shape<batch, heads, keys, d_k>>(2, 4);
  auto v = test::random_input<shape<batch, heads, keys, d_v>>(2, 4);
  const auto paper = make<nn::scaled_dot_product<double, op_config, cpu>>("");
  for (const mask_type& wrong : {mask_type(1, 3, 4), mask_type(2, 2, 4), mask_type(2, 3, 5)})
    CHECK_THROWS_WITH_AS(nn::variant_attention(paper, nn::context{}, q, k, v, wrong, nn::attention_kind::encoder_self),
                         doctest::Contains("mask"), extent_error);
  CHECK_NOTHROW(nn::variant_attention(paper, nn::context{}, q, k, v, mask_type(2, 3, 4), nn::attention_kind::encoder_self));
}

}  // namespace

}  // namespace nn_masks_test
