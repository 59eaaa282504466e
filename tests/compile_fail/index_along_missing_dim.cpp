// Compile-fail case: the index along heads of a tensor that has no heads.
// expect: attn::index_along: the dimension is not in the operand's shape

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, src>> x(2, 3);
  auto ok = attn::index_along<src>(x);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::index_along<heads>(x);
  (void)bad;
#endif
}
