// Compile-fail case: A shape that names a dimension twice (self-attention needs a second name: rename).
// expect: attn::shape: a dimension appears twice

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, tgt, src>> ok(2, 3, 3);
  (void)ok;
#ifdef ATTN_KO
  attn::tensor<float, attn::shape<batch, tgt, tgt>> bad(2, 3, 3);
  (void)bad;
#endif
}
