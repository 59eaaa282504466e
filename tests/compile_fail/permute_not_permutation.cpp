// Compile-fail case: A permute that drops a dimension (and names one the tensor lacks).
// expect: attn::permute: the new order must name each dimension of the operand once

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, tgt, d_k>> x(2, 3);
  auto ok = attn::permute<d_k, batch, tgt>(x);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::permute<d_k, batch, src>(x);
  (void)bad;
#endif
}
