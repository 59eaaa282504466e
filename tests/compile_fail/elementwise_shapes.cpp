// Compile-fail case: Adding a [batch, tgt] mask to a [batch, src] score: the shapes name different dimensions.
// expect: attn::elementwise: operand shapes differ
// expect: {"tgt"}
// expect: {"src"}

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, src>> scores(2, 3);
  attn::tensor<float, attn::shape<batch, src>> padding(2, 3);
  attn::tensor<float, attn::shape<batch, tgt>> mask(2, 3);
  auto ok = scores + padding;
  (void)ok;
#ifdef ATTN_KO
  auto bad = scores + mask;
  (void)bad;
#endif
}
