// Compile-fail case: A shape that names a dimension twice (self-attention needs a second name: rename).
// expect: attn::shape: a dimension appears twice

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
  attn::tensor<float, attn::shape<batch, tgt, src>> ok(2, 3, 3);
  (void)ok;
#ifdef ATTN_KO
  attn::tensor<float, attn::shape<batch, tgt, tgt>> bad(2, 3, 3);
  (void)bad;
#endif
}
