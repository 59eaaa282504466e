// Compile-fail case: a variant whose score modification is not elementwise (it sums over the
// keys), so the scores would lose a dimension.
// expect: a variant's score modification must keep the scores' shape

#include <attn/attn.hpp>

using namespace attn;
struct widths : nn::config<nn::widths<8, 12, 2, 3, 3>> {};
using Q = grad::variable<float, shape<nn::batch, widths::heads, nn::tgt, widths::d_k>>;
using K = grad::variable<float, shape<nn::batch, widths::heads, nn::keys, widths::d_k>>;
using M = nn::attention_mask<float, nn::batch, nn::tgt, cpu>;

template <class T, class C, class D>
struct key_biased {  // adds a constant: fine
  template <class S>
  auto modify(const S& s, index_t) const {
    return s + 1.0f;
  }
};
template <class T, class C, class D>
struct key_summed {  // Σ over keys: not a modification of each score
  template <class S>
  auto modify(const S& s, index_t) const {
    return sum<nn::keys>(s);
  }
};

int main() {
  Q q(tensor<float, Q::shape_type>(1, 2));
  K k(tensor<float, K::shape_type>(1, 2));
  M m(1, 2, 2);
  auto ok = nn::variant_attention(key_biased<float, widths, cpu>{}, nn::context{}, q, k, k, m,
                                  nn::attention_kind::encoder_self);
  (void)ok;
#ifdef ATTN_KO
  auto bad = nn::variant_attention(key_summed<float, widths, cpu>{}, nn::context{}, q, k, k, m,
                                   nn::attention_kind::encoder_self);
  (void)bad;
#endif
}
