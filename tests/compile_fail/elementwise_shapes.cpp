// Compile-fail case: Adding a [batch, tgt] mask to a [batch, src] score: the shapes name different dimensions.
// expect: attn::elementwise: operand shapes differ
// expect: {"tgt"}
// expect: {"src"}

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
