// Compile-fail case: Contracting d_ff, which the activations [batch, d_model] do not have.
// expect: attn::contract: the contracted dimension is missing from the first operand

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, d_model>> x(2);
  attn::tensor<float, attn::shape<d_model, d_ff>> w;
  auto ok = attn::contract<d_model>(x, w);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::contract<d_ff>(x, w);
  (void)bad;
#endif
}
