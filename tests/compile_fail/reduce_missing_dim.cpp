// Compile-fail case: Summing over heads, which the tensor does not have.
// expect: attn::reduce: the reduced dimension is not in the shape

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, src>> x(2, 3);
  auto ok = attn::sum<src>(x);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::sum<heads>(x);
  (void)bad;
#endif
}
