// grad::fused_attention: gradient checks (double) with padding, causal masks, a rule and grouped
// key/value heads, and equality with the unfused composition of eq. (1) (products and a masked
// softmax), values and gradients.
#include <doctest/doctest.h>

#include <cmath>

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

}  // namespace
