// Compile-fail case: A mask [src, batch] cannot be broadcast to [batch, heads, tgt, src] without a permute.
// expect: attn::broadcast: the operand's dimensions must appear in the target shape, in the same order

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, heads, tgt, src>> scores(2, 3, 4);
  attn::tensor<float, attn::shape<batch, src>> mask(2, 4);
  attn::tensor<float, attn::shape<src, batch>> mask_transposed(4, 2);
  auto ok = attn::broadcast_like(mask, scores);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::broadcast_like(mask_transposed, scores);
  (void)bad;
#endif
}
