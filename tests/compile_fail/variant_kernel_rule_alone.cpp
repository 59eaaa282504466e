// Compile-fail case: a variant whose mask rule has a kernel form and no expression, so the
// unfused path would not mask at all.
// expect: a variant with a kernel_rule must give the same rule as allowed(query, key) too

#include <attn/attn.hpp>

using namespace attn;
struct widths : nn::config<nn::widths<8, 12, 2, 3, 3>> {};
using Q = grad::variable<float, shape<nn::batch, widths::heads, nn::tgt, widths::d_k>>;
using K = grad::variable<float, shape<nn::batch, widths::heads, nn::keys, widths::d_k>>;
using M = nn::attention_mask<float, nn::batch, nn::tgt, cpu>;

template <class T, class C, class D>
struct band_both_ways {  // the rule in both forms: fine
  template <class I, class J>
  auto allowed(const I& query, const J& key) const {
    return abs(query - key) <= value_t<I>(1);
  }
  key_band kernel_rule(index_t first_query) const { return {first_query - 1, first_query + 1}; }
};
template <class T, class C, class D>
struct band_for_the_kernel_alone {
  key_band kernel_rule(index_t first_query) const { return {first_query - 1, first_query + 1}; }
};

int main() {
  Q q(tensor<float, Q::shape_type>(1, 2));
  K k(tensor<float, K::shape_type>(1, 2));
  M m(1, 2, 2);
  auto ok = nn::variant_attention(band_both_ways<float, widths, cpu>{}, nn::context{}, q, k, k, m,
                                  nn::attention_kind::encoder_self);
  (void)ok;
#ifdef ATTN_KO
  auto bad = nn::variant_attention(band_for_the_kernel_alone<float, widths, cpu>{}, nn::context{}, q, k, k, m,
                                   nn::attention_kind::encoder_self);
  (void)bad;
#endif
}
