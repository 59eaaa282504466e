// Compile-fail case: Slicing a static dimension would change a size that is part of its type.
// expect: attn::slice: only a dynamic dimension can be sliced

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<tgt, d_model>> x(5);
  auto ok = attn::slice<tgt>(x, 1, 2);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::slice<d_model>(x, 0, 64);
  (void)bad;
#endif
}
