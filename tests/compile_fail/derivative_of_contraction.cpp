// Compile-fail case: differentiating a product, which is not elementwise.
// expect: attn::derivative: the expression is not elementwise

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, d_k>> q(2);
  attn::tensor<float, attn::shape<src, d_k>> k(3);
  auto ok = attn::derivative<0>(attn::exp(attn::input<0>(q)));
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::derivative<0>(attn::contract<d_k>(attn::input<0>(q), k));
  (void)bad;
#endif
}
