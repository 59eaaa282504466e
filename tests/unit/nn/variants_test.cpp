// Attention variants (include/attn/nn/variant.hpp, nn/variants/): each shipped variant against
// a plain-loop reference, gradient checks in double (inputs and the variants' own parameters),
// run-time choice by name, and a variant defined here, as a user would, training through nn.
#include <doctest/doctest.h>

#include <attn/attn.hpp>
#include <attn/train/adam.hpp>
#include <attn/train/loss.hpp>
#include <cmath>
#include <functional>
#include <type_traits>

#include "../grad/gradcheck.hpp"
#include "../../../examples/variant/soft_capped.hpp"
#include "micro.hpp"

// Its own namespace: unit-model compiles its files together (tests/unit/meson.build).
namespace nn_variants_test {
/// A device whose fused kernel is narrower than the CPU's and fast only for some types and
/// widths, for the rules of nn's choice that the CPU's kernel never meets.
struct narrow_device {};
}  // namespace nn_variants_test

template <>
struct attn::fused_attention<nn_variants_test::narrow_device> {
  static constexpr bool available = true;
  static constexpr index_t widest_head = 8;
  static constexpr index_t fastest_width = 4;  // fast_for: float in heads up to this wide, and past the widest
  static constexpr index_t automatic_from_keys = 16;
  static constexpr index_t automatic_from_queries = 2;
  static constexpr index_t automatic_modified_from_keys = 1;
  template <class T>
  static bool fast_for(index_t head_width) {
    // Fast past the widest too, so that only the width rule keeps the automatic choice off them.
    return std::is_same_v<T, float> && (head_width <= fastest_width || head_width > widest_head);
  }
  static constexpr bool modifies_scores = true;
};

namespace nn_variants_test {

namespace {
using namespace attn;
using nn::batch;
using nn::keys;
using nn::tgt;

// Four heads of d_k 3 and d_v 2, so that grouped-query attention has groups of two.
struct op_config : nn::config<nn::widths<8, 12, 4, 3, 2>> {};
using heads = op_config::heads;
using d_k = op_config::d_k;
using d_v = op_config::d_v;
using kv2 = dim<"kv_heads", 2>;
using kv1 = dim<"kv_heads", 1>;

constexpr index_t sentences = 2, queries = 4, length = 5;

template <class G>
struct inputs {
  grad::variable<double, shape<batch, heads, tgt, d_k>> q = test::random_input<shape<batch, heads, tgt, d_k>>(sentences, queries);
  grad::variable<double, shape<batch, G, keys, d_k>> k = test::random_input<shape<batch, G, keys, d_k>>(sentences, length);
  grad::variable<double, shape<batch, G, keys, d_v>> v = test::random_input<shape<batch, G, keys, d_v>>(sentences, length);
  tensor<double, shape<batch, tgt, keys>> mask{sentences, queries, length};  // the second sentence's last key is padding
  nn::attention_mask<double, batch, tgt, cpu> given{sentences, queries, length};  // `mask` as attention reads it

  explicit inputs(bool causal = false) {
    for (index_t b = 0; b < sentences; ++b)
      for (index_t i = 0; i < queries; ++i)
        for (index_t j = 0; j < length; ++j)
          mask(b, i, j) = (b == 1 && j == length - 1) || (causal && j > i + 1) ? nn::masked<double> : 0.0;
    given = nn::attention_mask<double, batch, tgt, cpu>(mask);
  }
};

using score_rule = std::function<double(index_t b, index_t h, index_t i, index_t j, double dot)>;

/// softmax_j(score(b, h, i, j, q·k) + mask, or −∞ where `allowed` says no) · v, head h reading
/// key/value head h / (H / G), in loops.
template <class G>
tensor<double, shape<batch, heads, tgt, d_v>> reference(const inputs<G>& in, const score_rule& score,
                                                        const std::function<bool(index_t, index_t)>& allowed) {
  const index_t per_group = heads::extent / G::extent;
  tensor<double, shape<batch, heads, tgt, d_v>> out(sentences, queries);
  const auto& q = in.q.value();
  const auto& k = in.k.value();
  const auto& v = in.v.value();
  for (index_t b = 0; b < sentences; ++b)
    for (index_t h = 0; h < heads::extent; ++h)
      for (index_t i = 0; i < queries; ++i) {
        std::vector<double> s(std::size_t(length), 0.0);
        double top = -1e300, total = 0;
        for (index_t j = 0; j < length; ++j) {
          double dot = 0;
          for (index_t d = 0; d < d_k::extent; ++d) dot += q(b, h, i, d) * k(b, h / per_group, j, d);
          s[std::size_t(j)] = score(b, h, i, j, dot) + (allowed(i, j) ? in.mask(b, i, j) : nn::masked<double>);
          top = std::max(top, s[std::size_t(j)]);
        }
        for (auto& x : s) total += (x = std::exp(x - top));
        for (index_t d = 0; d < d_v::extent; ++d) {
          double sum = 0;
          for (index_t j = 0; j < length; ++j) sum += s[std::size_t(j)] / total * v(b, h / per_group, j, d);
          out(b, h, i, d) = sum;
        }
      }
  return out;
}

const auto everywhere = [](index_t, index_t) { return true; };
const score_rule scaled = [](index_t, index_t, index_t, index_t, double dot) { return dot / std::sqrt(3.0); };

template <class S>
double largest_difference(const tensor<double, S>& a, const tensor<double, S>& b) {
  double worst = 0;
  for (index_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a.data()[i] - b.data()[i]));
  return worst;
}

template <template <class, class, class> class V>
V<double, op_config, cpu> make(const std::string& spec, nn::attention_kind kind = nn::attention_kind::encoder_self) {
  random_stream init(5);
  return nn::make_variant<V<double, op_config, cpu>>(init, kind, nn::variant_spec::parse(spec));
}

template <class V, class G>
auto attend(const V& variant, const inputs<G>& in, nn::attention_kind kind = nn::attention_kind::encoder_self,
            index_t first_query = 0, grad::tape* t = nullptr,
            nn::attention_path path = nn::attention_path::automatic) {
  return nn::variant_attention(variant, nn::context{t, nullptr, nullptr, path}, in.q, in.k, in.v, in.given, kind,
                               first_query);
}

/// Both ways of computing attention: the fused kernel and products with a softmax.
constexpr nn::attention_path both_paths[] = {nn::attention_path::fused, nn::attention_path::unfused};

/// Finite-difference check of the variant's attention through every input and `extra` targets.
template <class V, class G>
void check_gradients(const V& variant, const inputs<G>& in, std::vector<test::gradient_target> extra = {},
                     nn::attention_kind kind = nn::attention_kind::encoder_self, index_t first_query = 0,
                     nn::attention_path path = nn::attention_path::automatic) {
  const auto r = test::random_like(attend(variant, in, kind, first_query));
  auto loss_of = [&](grad::tape* t) {
    return test::weighted_sum(t, attend(variant, in, kind, first_query, t, path), r);
  };
  std::vector<test::gradient_target> targets{test::target("q", in.q), test::target("k", in.k),
                                             test::target("v", in.v)};
  targets.insert(targets.end(), extra.begin(), extra.end());
  const auto report = test::check_gradients(loss_of, targets, 40);
  INFO(report.where);
  CHECK(report.worst < 1e-6);
  CHECK(report.checked > 0);
}
}  // namespace

TEST_CASE("variants: scaled (eq. 1) and unscaled dot-product attention match loops and pass gradient checks") {
  const inputs<heads> in;
  const auto paper = make<nn::scaled_dot_product>("");
  const auto unscaled = make<nn::dot_product>("unscaled");
  const score_rule dot = [](index_t, index_t, index_t, index_t, double d) { return d; };
  for (auto path : both_paths) {
    CAPTURE(path);
    CHECK(largest_difference(attend(paper, in, {}, 0, nullptr, path).value(), reference(in, scaled, everywhere)) <
          1e-12);
    CHECK(largest_difference(attend(unscaled, in, {}, 0, nullptr, path).value(), reference(in, dot, everywhere)) <
          1e-12);
    check_gradients(paper, in, {}, {}, 0, path);
    check_gradients(unscaled, in, {}, {}, 0, path);
  }
  // The unfused path is the one the model took before the fused kernel: the same numbers as
  // scaled_dot_product_attention; with 5 keys the automatic choice takes it.
  CHECK(largest_difference(attend(paper, in, {}, 0, nullptr, nn::attention_path::unfused).value(),
                           nn::scaled_dot_product_attention(nn::context{}, in.q, in.k, in.v, in.mask).value()) == 0);
  static_assert(length < fused_attention<cpu>::automatic_from_keys);
  CHECK(largest_difference(attend(paper, in).value(),
                           nn::scaled_dot_product_attention(nn::context{}, in.q, in.k, in.v, in.mask).value()) == 0);
}

TEST_CASE("variants: from automatic_from_keys keys and automatic_from_queries queries on, the automatic choice is "
          "the fused kernel") {
  const index_t many = fused_attention<cpu>::automatic_from_keys;
  const index_t enough = fused_attention<cpu>::automatic_from_queries;
  auto k = test::random_input<shape<batch, heads, keys, d_k>>(1, many);
  auto v = test::random_input<shape<batch, heads, keys, d_v>>(1, many);
  const auto paper = make<nn::scaled_dot_product>("");
  for (const index_t queries : {enough, enough - 1}) {  // a decoding step's few queries: unfused
    CAPTURE(queries);
    auto q = test::random_input<shape<batch, heads, tgt, d_k>>(1, queries);
    const nn::attention_mask<double, batch, tgt, cpu> mask(1, queries, many);  // every key visible
    const auto run = [&](nn::attention_path path) {
      return nn::variant_attention(paper, nn::context{nullptr, nullptr, nullptr, path}, q, k, v, mask,
                                   nn::attention_kind::encoder_self)
          .value();
    };
    const auto automatic = run(nn::attention_path::automatic);
    const auto expected = run(queries == enough ? nn::attention_path::fused : nn::attention_path::unfused);
    CHECK(largest_difference(automatic, expected) == 0);
    CHECK(largest_difference(automatic, run(queries == enough ? nn::attention_path::unfused
                                                              : nn::attention_path::fused)) < 1e-12);
  }
}

TEST_CASE("variants: the automatic choice asks the kernel whether it is fast for the type and the heads' width, and "
          "asking for the fused kernel with heads wider than it takes says so") {
  using narrow = fused_attention<narrow_device>;
  const auto paper = make<nn::scaled_dot_product>("");
  using V = std::remove_cvref_t<decltype(paper)>;
  using float_scores = tensor<float, shape<batch, heads, tgt, keys>>;
  using double_scores = tensor<double, shape<batch, heads, tgt, keys>>;
  const auto takes = [&]<class S>(S*, nn::attention_path path, index_t query_count, index_t key_count, index_t width,
                                  nn::attention_record* record = nullptr) {
    return nn::detail::takes_fused_path<true, V, S, narrow_device>(paper, nn::context{nullptr, nullptr, record, path},
                                                                     query_count, key_count, width);
  };
  constexpr auto automatic = nn::attention_path::automatic, fused = nn::attention_path::fused;
  const index_t enough = narrow::automatic_from_queries, many = narrow::automatic_from_keys;
  float_scores* in_float = nullptr;
  double_scores* in_double = nullptr;
  CHECK(takes(in_float, automatic, enough, many, narrow::fastest_width));
  CHECK_FALSE(takes(in_float, automatic, enough, many - 1, narrow::fastest_width));
  CHECK_FALSE(takes(in_float, automatic, enough - 1, many, narrow::fastest_width));
  CHECK_FALSE(takes(in_double, automatic, enough, many, narrow::fastest_width));       // the slow road's type
  CHECK_FALSE(takes(in_float, automatic, enough, many, narrow::fastest_width + 1));    // a slow width
  CHECK_FALSE(takes(in_float, automatic, enough, many, narrow::widest_head + 1));      // too wide: unfused
  CHECK_FALSE(takes(in_float, nn::attention_path::unfused, enough, many, narrow::fastest_width));
  // Asked for, the kernel runs on its slow road too, but not on heads wider than it takes.
  CHECK(takes(in_double, fused, 1, 1, narrow::widest_head));
  CHECK_THROWS_WITH_AS(takes(in_float, fused, enough, many, narrow::widest_head + 1),
                       "attn::nn: fused attention was asked for, but the device's kernel takes heads up to 8 wide, "
                       "not 9",
                       std::invalid_argument);
  // Where another reason comes first, the message is that reason's alone.
  nn::attention_record record;
  CHECK_THROWS_WITH_AS(takes(in_float, fused, enough, many, narrow::widest_head + 1, &record),
                       "attn::nn: fused attention was asked for, but the attention weights are being recorded",
                       std::invalid_argument);
}

TEST_CASE("variants: a variant whose scores the kernel modifies takes it from automatic_modified_from_keys keys on") {
  static_assert(fused_attention<cpu>::automatic_modified_from_keys <= length);
  const inputs<heads> in(true);
  const auto alibi = make<nn::alibi>("alibi:learned", nn::attention_kind::decoder_self);
  const auto run = [&](nn::attention_path path) {
    return attend(alibi, in, nn::attention_kind::decoder_self, 1, nullptr, path).value();
  };
  const auto automatic = run(nn::attention_path::automatic);
  CHECK(largest_difference(automatic, run(nn::attention_path::fused)) == 0);
  CHECK(largest_difference(automatic, run(nn::attention_path::unfused)) < 1e-12);
  // Unmodified, the same few keys keep the unfused path.
  const auto paper = make<nn::scaled_dot_product>("");
  CHECK(largest_difference(attend(paper, in).value(), attend(paper, in, {}, 0, nullptr, nn::attention_path::unfused).value()) ==
        0);
}

TEST_CASE("variants: asking for the fused kernel where it cannot run says why") {
  const inputs<heads> in;
  const auto additive = make<nn::additive>("additive");
  const auto alibi = make<nn::alibi>("alibi");
  const auto fused = nn::attention_path::fused;
  CHECK_THROWS_WITH_AS(attend(additive, in, {}, 0, nullptr, fused), doctest::Contains("scores with a function"),
                       std::invalid_argument);
  CHECK_NOTHROW(attend(alibi, in, {}, 0, nullptr, fused));  // a modification runs inside the kernel
  nn::attention_record record;
  CHECK_THROWS_WITH_AS(nn::variant_attention(make<nn::scaled_dot_product>(""), nn::context{nullptr, nullptr, &record, fused},
                                             in.q, in.k, in.v, in.given, nn::attention_kind::encoder_self),
                       doctest::Contains("weights are being recorded"), std::invalid_argument);
  // Where rules do not apply (ALiBi in cross-attention), ALiBi is plain dot-product attention: fused.
  const auto cross = make<nn::alibi>("alibi", nn::attention_kind::encoder_decoder);
  CHECK_NOTHROW(attend(cross, in, nn::attention_kind::encoder_decoder, 0, nullptr, fused));
}

TEST_CASE("variants: dropout on the weights drops the same weights on both paths, and none at inference") {
  const inputs<heads> in(true);
  const auto paper = make<nn::scaled_dot_product>("");
  const auto learned = make<nn::alibi>("alibi:learned", nn::attention_kind::decoder_self);
  const auto run = [&](const auto& variant, nn::attention_path path, bool training) {
    in.q.clear_grad();
    learned.slopes.clear_grad();
    random_stream stream(3, 50);
    grad::tape t;
    const auto out = nn::variant_attention(variant, nn::context{&t, training ? &stream : nullptr, nullptr, path}, in.q,
                                           in.k, in.v, in.given, nn::attention_kind::decoder_self, 1, 0.4);
    grad::backward(t, test::weighted_sum(&t, out, test::random_like(out)));
    tensor<double, shape<heads>> slopes_grad;  // zeros unless the variant is ALiBi
    if (learned.slopes.has_grad()) slopes_grad = tensor<double, shape<heads>>(learned.slopes.grad());
    return std::tuple{tensor<double, shape<batch, heads, tgt, d_v>>(out.value()),
                      tensor<double, shape<batch, heads, tgt, d_k>>(in.q.grad()), slopes_grad};
  };
  const auto check_paths = [&](const auto& variant) {
    test::rng().seed(5);
    const auto [fused, fused_grad, fused_slopes] = run(variant, nn::attention_path::fused, true);
    test::rng().seed(5);
    const auto [unfused, unfused_grad, unfused_slopes] = run(variant, nn::attention_path::unfused, true);
    CHECK(largest_difference(fused, unfused) < 1e-12);
    CHECK(largest_difference(fused_grad, unfused_grad) < 1e-12);
    CHECK(largest_difference(fused_slopes, unfused_slopes) < 1e-12);
    const auto [inference, inference_grad, inference_slopes] = run(variant, nn::attention_path::fused, false);
    CHECK(largest_difference(fused, inference) > 0.01);  // weights were dropped in training only
    CHECK(largest_difference(inference, attend(variant, in, nn::attention_kind::decoder_self, 1).value()) < 1e-12);
  };
  check_paths(paper);
  check_paths(learned);
}

TEST_CASE("variants: additive attention, vᵀ tanh(q + k) a head, matches loops; its v gets gradients") {
  const inputs<heads> in;
  const auto additive = make<nn::additive>("additive");
  const auto& w = additive.v.value();
  const auto& q = in.q.value();
  const auto& k = in.k.value();
  const score_rule bahdanau = [&](index_t b, index_t h, index_t i, index_t j, double) {
    double s = 0;
    for (index_t d = 0; d < d_k::extent; ++d) s += w(h, d) * std::tanh(q(b, h, i, d) + k(b, h, j, d));
    return s;
  };
  CHECK(largest_difference(attend(additive, in).value(), reference(in, bahdanau, everywhere)) < 1e-12);
  check_gradients(additive, in, {test::target("additive.v", additive.v)});
}

TEST_CASE("variants: restricted self-attention sees |i - j| <= r/2, composes with the causal mask, not in cross-attention") {
  const auto restricted = make<nn::restricted>("restricted:3");
  CHECK(restricted.r == 3);
  const auto near = [](index_t i, index_t j) { return std::abs(i - j) <= 1; };
  const inputs<heads> open, causal(true);
  // Queries shifted by one position, as in incremental decoding: query i sits at i + 1 and sees
  // keys i … i + 2 (every row keeps a key: a row with none is 0 fused and meaningless unfused).
  const auto shifted = [](index_t i, index_t j) { return std::abs(i + 1 - j) <= 1; };
  for (auto path : both_paths) {
    CAPTURE(path);
    CHECK(largest_difference(attend(restricted, open, {}, 0, nullptr, path).value(), reference(open, scaled, near)) <
          1e-12);
    CHECK(largest_difference(attend(restricted, causal, {}, 0, nullptr, path).value(),
                             reference(causal, scaled, near)) < 1e-12);
    CHECK(largest_difference(attend(restricted, open, nn::attention_kind::decoder_self, 1, nullptr, path).value(),
                             reference(open, scaled, shifted)) < 1e-12);
    check_gradients(restricted, causal, {}, {}, 0, path);
  }
  // The rule's two forms agree: the expression the unfused path folds into the mask, and the
  // band of keys the fused kernels walk (decoding's shifted queries too), for odd and even r.
  for (const char* spec : {"restricted:3", "restricted:4", "restricted:1"}) {
    const auto variant = make<nn::restricted>(spec);
    const tensor<double, shape<tgt, keys>> grid(12, 12);
    for (const index_t first_query : {0, 5}) {
      const tensor<bool, shape<tgt, keys>> allowed(
          variant.allowed(index_along<tgt>(grid, double(first_query)), index_along<keys>(grid)));
      const auto band = variant.kernel_rule(first_query);
      for (index_t i = 0; i < 12; ++i)
        for (index_t j = 0; j < 12; ++j) {
          CAPTURE(spec);
          CAPTURE(first_query);
          CAPTURE(i);
          CAPTURE(j);
          CHECK(band(i, j) == bool(allowed(i, j)));
        }
    }
  }
  const auto cross = make<nn::restricted>("restricted:3", nn::attention_kind::encoder_decoder);
  CHECK(largest_difference(attend(cross, open, nn::attention_kind::encoder_decoder).value(),
                           reference(open, scaled, everywhere)) < 1e-12);
  CHECK_THROWS_WITH_AS(make<nn::restricted>("restricted"), doctest::Contains("restricted:N"), std::invalid_argument);
  CHECK_THROWS_AS(make<nn::restricted>("restricted:-2"), std::invalid_argument);
}

/// Restricted attention's window of 3 as an expression alone, with no kernel form: the fused
/// path asks it a pair at a time (grad::pair_rule).
template <class T, class C, class Device>
struct near_window {
  template <class I, class J>
  auto allowed(const I& query, const J& key) const {
    return abs(query - key) <= value_t<I>(1);
  }
};

TEST_CASE("variants: a rule given as an expression alone sees what restricted attention sees, shifted queries too") {
  const auto window = make<near_window>("");
  const auto near = [](index_t i, index_t j) { return std::abs(i - j) <= 1; };
  const auto shifted = [](index_t i, index_t j) { return std::abs(i + 1 - j) <= 1; };
  const inputs<heads> open, causal(true);
  for (auto path : both_paths) {
    CAPTURE(path);
    CHECK(largest_difference(attend(window, open, {}, 0, nullptr, path).value(), reference(open, scaled, near)) < 1e-12);
    CHECK(largest_difference(attend(window, causal, {}, 0, nullptr, path).value(), reference(causal, scaled, near)) <
          1e-12);
    CHECK(largest_difference(attend(window, open, nn::attention_kind::decoder_self, 1, nullptr, path).value(),
                             reference(open, scaled, shifted)) < 1e-12);
    check_gradients(window, causal, {}, {}, 1, path);
  }
}

TEST_CASE("variants: grouped-query and multi-query heads share keys and values as in loops") {
  const inputs<kv2> grouped;
  const inputs<kv1> single;
  const nn::grouped_query<double, op_config, cpu, 2> gqa{};
  const auto mqa = make<nn::multi_query>("mqa");
  for (auto path : both_paths) {
    CAPTURE(path);
    CHECK(largest_difference(attend(gqa, grouped, {}, 0, nullptr, path).value(),
                             reference(grouped, scaled, everywhere)) < 1e-12);
    CHECK(largest_difference(attend(mqa, single, {}, 0, nullptr, path).value(),
                             reference(single, scaled, everywhere)) < 1e-12);
    check_gradients(gqa, grouped, {}, {}, 0, path);
    check_gradients(mqa, single, {}, {}, 0, path);
  }
  // Grouping composes with another variant's scores: grouped-query ALiBi.
  using gqa_alibi = nn::grouped_query<double, op_config, cpu, 2, nn::alibi>;
  random_stream init(1);
  const auto both = nn::make_variant<gqa_alibi>(init, nn::attention_kind::encoder_self, nn::variant_spec::parse("gqa"));
  const score_rule biased = [](index_t, index_t h, index_t i, index_t j, double dot) {
    return dot / std::sqrt(3.0) - std::exp2(-8.0 * double(h + 1) / 4) * double(std::abs(i - j));
  };
  CHECK(largest_difference(attend(both, grouped).value(), reference(grouped, biased, everywhere)) < 1e-12);
}

TEST_CASE("variants: ALiBi biases head h by -m_h |i - j|; learned slopes get gradients, fixed ones are constants") {
  const inputs<heads> in, causal(true);
  const auto fixed = make<nn::alibi>("alibi");
  const auto learned = make<nn::alibi>("alibi:learned");
  for (index_t h = 0; h < heads::extent; ++h) CHECK(fixed.slopes.value()(h) == std::exp2(-2.0 * double(h + 1)));
  const auto bias_from = [](index_t first) {
    return score_rule([first](index_t, index_t h, index_t i, index_t j, double dot) {
      return dot / std::sqrt(3.0) - std::exp2(-2.0 * double(h + 1)) * double(std::abs(i + first - j));
    });
  };
  for (auto path : both_paths) {
    CAPTURE(path);
    const auto self = nn::attention_kind::encoder_self;
    CHECK(largest_difference(attend(fixed, in, self, 0, nullptr, path).value(), reference(in, bias_from(0), everywhere)) <
          1e-12);
    CHECK(largest_difference(attend(fixed, causal, nn::attention_kind::decoder_self, 2, nullptr, path).value(),
                             reference(causal, bias_from(2), everywhere)) < 1e-12);
    const auto cross = make<nn::alibi>("alibi", nn::attention_kind::encoder_decoder);
    CHECK(largest_difference(attend(cross, in, nn::attention_kind::encoder_decoder, 0, nullptr, path).value(),
                             reference(in, scaled, everywhere)) < 1e-12);
    check_gradients(learned, causal, {test::target("alibi.slopes", learned.slopes)}, nn::attention_kind::decoder_self,
                    1, path);
  }

  grad::parameter_list<double> fixed_list, learned_list;
  auto fixed_copy = fixed;
  auto learned_copy = learned;
  fixed_copy.collect(fixed_list);
  learned_copy.collect(learned_list);
  CHECK(fixed_list.count() == 0);  // nothing for Adam to move, nothing in a checkpoint
  CHECK(learned_list.count() == heads::extent);
  CHECK_THROWS_AS(make<nn::alibi>("alibi:sometimes"), std::invalid_argument);
}

namespace {
template <class T, class C, class D>
using shipped = nn::one_of<T, C, D, nn::scaled_dot_product, nn::dot_product, nn::additive, nn::restricted, nn::alibi>;
}

TEST_CASE("variants: one_of chooses by name at run time and computes what the chosen variant does") {
  const inputs<heads> in(true);
  for (const std::string spec : {"", "scaled", "unscaled", "additive", "restricted:3", "alibi:learned"}) {
    INFO(spec);
    const auto chosen = make<shipped>(spec);
    CHECK(chosen.name() == (spec.empty() ? "scaled" : nn::variant_spec::parse(spec).name));
    const auto direct = std::visit(
        [&](const auto& v) { return attend(v, in, nn::attention_kind::decoder_self, 1).value(); }, chosen.chosen);
    CHECK(largest_difference(attend(chosen, in, nn::attention_kind::decoder_self, 1).value(), direct) == 0);
  }
  CHECK_THROWS_WITH_AS(make<shipped>("sparse"), doctest::Contains("scaled, unscaled, additive, restricted, alibi"),
                       std::invalid_argument);
  // A model built for one variant refuses another's name (a checkpoint's variant must be the model's).
  CHECK_THROWS_WITH_AS(make<nn::alibi>("additive"), doctest::Contains("attention is 'alibi'"), std::invalid_argument);
}

TEST_CASE_TEMPLATE("variants: a model with each variant passes gradient checks through its loss", C,
                   test::micro_unscaled, test::micro_additive, test::micro_restricted, test::micro_mqa,
                   test::micro_alibi) {
  nn::transformer<double, C> model(11, 3, 0, nn::defaults<C>());
  const auto source = test::tokens<nn::src>(2, 4, {3, 4, 5, 2, 6, 7, 2, 0});
  const auto target = test::tokens<nn::tgt>(2, 4, {1, 3, 4, 5, 1, 6, 7, 0});
  const auto r = [&] {
    const auto logits = model(nn::context{}, source, target);
    return test::random_like(logits);
  }();
  auto loss_of = [&](grad::tape* t) { return test::weighted_sum(t, model(nn::context{t}, source, target), r); };
  auto list = model.parameters();
  const auto report = test::check_gradients(loss_of, test::targets(list), 6);
  INFO(report.where);
  CHECK(report.worst < 1e-6);
}

/// Multi-head attention of configuration C (its variant from `spec`, C's by default) on its
/// projections' rows (operator()) against its heads split apart and merged again
/// (keys_and_values and attend), on the fused path, and against the unfused path: outputs and
/// every gradient, self- and cross-attention. `in_rows`: whether operator() takes the rows (four
/// recorded steps fewer: no split of q, k and v, no merge of the heads).
template <class C>
void check_attention_in_rows(const std::string& spec, bool in_rows) {
  using d_model = typename C::d_model;
  const auto source = test::tokens<nn::src>(2, 5, {3, 4, 5, 2, 6, 7, 8, 2, 0, 0});
  const auto target = test::tokens<nn::tgt>(2, 4, {1, 3, 4, 5, 1, 6, 7, 0});
  const auto causal = nn::causal_mask<double, nn::tgt>(target, 0);
  const auto cross = nn::padding_mask<double, nn::tgt>(source, 4, 0);
  auto x = test::random_input<shape<batch, tgt, d_model>>(2, 4);
  auto memory = test::random_input<shape<batch, nn::src, d_model>>(2, 5);
  const auto r = test::random_like(x);
  for (const auto kind : {nn::attention_kind::decoder_self, nn::attention_kind::encoder_decoder}) {
    INFO("kind ", int(kind), ", variant '", spec, "'");
    random_stream init(3);
    nn::multi_head_attention<double, C, cpu> attention(init, kind, nn::variant_spec::parse(spec));
    grad::parameter_list<double> list;
    attention.collect(list);
    const bool self = kind == nn::attention_kind::decoder_self;
    const auto run = [&](bool rows, nn::attention_path path) {
      list.zero_grad();
      x.clear_grad();
      memory.clear_grad();
      grad::tape t;
      const nn::context ctx{&t, nullptr, nullptr, path};
      const auto out = [&] {
        if (self) {
          if (rows) return attention(ctx, x, x, causal);
          const auto [k, v] = attention.keys_and_values(ctx, x);
          return attention.attend(ctx, x, k, v, causal);
        }
        if (rows) return attention(ctx, x, memory, cross);
        const auto [k, v] = attention.keys_and_values(ctx, memory);
        return attention.attend(ctx, x, k, v, cross);
      }();
      const std::size_t steps = t.size();
      grad::backward(t, test::weighted_sum(&t, out, r));
      std::vector<double> all(out.value().data(), out.value().data() + out.value().size());
      for (const auto& p : list.refs()) all.insert(all.end(), p.grad, p.grad + p.size);
      all.insert(all.end(), x.grad().data(), x.grad().data() + x.grad().size());
      if (!self) all.insert(all.end(), memory.grad().data(), memory.grad().data() + memory.grad().size());
      return std::pair{all, steps};
    };
    const auto path = in_rows ? nn::attention_path::fused : nn::attention_path::automatic;
    const auto [rows, rows_steps] = run(true, path);
    const auto [split, split_steps] = run(false, path);
    CHECK(rows == split);  // the same kernel on the same numbers
    CHECK(rows_steps + (in_rows ? 4 : 0) == split_steps);
    const auto [unfused, unfused_steps] = run(true, nn::attention_path::unfused);
    CHECK(test::relative_error(rows.data(), unfused) < 1e-12);
    if (!in_rows)  // a variant the kernel cannot compute: asked for the fused path, it says why
      CHECK_THROWS_WITH_AS(run(true, nn::attention_path::fused), doctest::Contains("fused attention was asked for"),
                           std::invalid_argument);
  }
}

TEST_CASE_TEMPLATE("variants: multi-head attention gives the fused kernel its projections' rows, with the numbers of "
                   "its heads split apart and fewer recorded steps",
                   C, test::micro, test::micro_unscaled, test::micro_restricted, test::micro_mqa, test::micro_alibi) {
  check_attention_in_rows<C>(nn::defaults<C>().attention, true);
}

namespace {
struct micro_shipped : test::micro {
  template <class T, class C, class D>
  using attention = shipped<T, C, D>;
};
}  // namespace

TEST_CASE("variants: with one_of, multi-head attention gives the fused kernel its rows where the chosen variant "
          "takes the fused path") {
  for (const std::string spec : {"scaled", "unscaled", "restricted:3", "alibi:learned"})
    check_attention_in_rows<micro_shipped>(spec, true);
  check_attention_in_rows<micro_shipped>("additive", false);  // scores of its own: products and a softmax
}

TEST_CASE("variants: the multi-query model's key and value projections are one head wide") {
  nn::transformer<double, test::micro_mqa> model(11);
  nn::transformer<double, test::micro> paper(11);
  const auto& layer = model.encoder_stack().layers[0].self_attention;
  CHECK(layer.key.weight.value().extents()[1] == test::micro::d_k::extent);
  CHECK(layer.value.weight.value().extents()[1] == test::micro::d_v::extent);
  CHECK(paper.parameters().count() - model.parameters().count() ==
        3 * 2 * (test::micro::d_model::extent + 1) * (test::micro::d_k::extent + test::micro::d_v::extent));
}

// A variant defined outside the library, as a user would (examples/variant/soft_capped.hpp):
// scores soft-capped by c·tanh(s / c), c a learned scalar a head. Nothing in include/attn knows it.
namespace {
struct micro_capped : test::micro {
  template <class T, class C, class D>
  using attention = soft_capped<T, C, D>;
};
}  // namespace

TEST_CASE("variants: a variant of your own passes the gradient check of the shipped ones") {
  const inputs<heads> in(true);
  const auto capped = make<soft_capped>("soft-capped");
  for (auto path : both_paths) {
    CAPTURE(path);  // its modification also runs inside the fused kernel, with the cap's gradient
    check_gradients(capped, in, {test::target("cap", capped.cap)}, nn::attention_kind::decoder_self, 0, path);
  }
  CHECK(largest_difference(attend(capped, in, nn::attention_kind::decoder_self, 0, nullptr, nn::attention_path::fused).value(),
                           attend(capped, in, nn::attention_kind::decoder_self, 0, nullptr, nn::attention_path::unfused).value()) <
        1e-12);
}

TEST_CASE("variants: a variant written outside the library trains a whole model through nn") {
  nn::transformer<double, micro_capped> model(11, 3);
  auto list = model.parameters();
  CHECK(list.count() == nn::transformer<double, test::micro>(11, 3).parameters().count() + 3 * 2 * 2);
  const auto source = test::tokens<nn::src>(2, 4, {3, 4, 5, 2, 6, 7, 8, 2});
  const auto target = test::tokens<nn::tgt>(2, 4, {1, 3, 4, 5, 1, 6, 7, 8});
  const auto next = test::tokens<nn::tgt>(2, 4, {3, 4, 5, 2, 6, 7, 8, 2});
  const auto r = test::random_like(model(nn::context{}, source, target));
  auto weighted = [&](grad::tape* t) { return test::weighted_sum(t, model(nn::context{t}, source, target), r); };
  const auto report = test::check_gradients(weighted, test::targets(list), 6);
  INFO(report.where);
  CHECK(report.worst < 1e-6);

  // Adam on the cross-entropy of a copy task: the loss falls, and the caps moved.
  train::adam<double> adam(list);
  const auto caps_before = to_host(model.encoder_stack().layers[0].self_attention.variant.cap.value());
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    list.zero_grad();
    grad::tape t;
    const auto result = train::cross_entropy(&t, model(nn::context{&t}, source, target), next, 0.0, nn::token{0});
    grad::backward(t, result.loss);
    last = result.loss.value().data()[0];
    if (step == 0) first = last;
    adam.step(1e-2);
  }
  CHECK(last < 0.5 * first);
  CHECK(to_host(model.encoder_stack().layers[0].self_attention.variant.cap.value())(0) != caps_before(0));
}

}  // namespace nn_variants_test
