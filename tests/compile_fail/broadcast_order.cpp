// Compile-fail case: A mask [src, batch] cannot be broadcast to [batch, heads, tgt, src] without a permute.
// expect: attn::broadcast: the operand's dimensions must appear in the target shape, in the same order

// The rules live in the expression layer: no backend needed, so the case compiles fast.
#include <attn/core.hpp>
#include <attn/expr.hpp>

using batch = attn::dim<"batch">;
using tgt = attn::dim<"tgt">;
using src = attn::dim<"src">;
using heads = attn::dim<"heads", 8>;
using d_k = attn::dim<"d_k", 32>;
using d_model = attn::dim<"d_model", 512>;
using d_ff = attn::dim<"d_ff", 2048>;

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
