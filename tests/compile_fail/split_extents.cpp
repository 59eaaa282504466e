// Compile-fail case: d_model (512) split into heads (8) x d_k (32): 256 != 512.
// expect: attn::split: the parts' extents do not multiply to the split dimension's

#include "dims.hpp"

int main() {
  using d_k64 = attn::dim<"d_k", 64>;
  attn::tensor<float, attn::shape<batch, d_model>> x(2);
  auto ok = attn::split<d_model, heads, d_k64>(x);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::split<d_model, heads, d_k>(x);
  (void)bad;
#endif
}
