// Compile-fail case: Merging heads and d_k when they are not adjacent (the permute back was forgotten).
// expect: attn::merge: the merged dimensions must be adjacent, outer before inner

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
  using d_all = attn::dim<"d_all", 256>;
  attn::tensor<float, attn::shape<batch, tgt, heads, d_k>> ok_layout(2, 3);
  attn::tensor<float, attn::shape<batch, heads, tgt, d_k>> per_head(2, 3);
  auto ok = attn::merge<heads, d_k, d_all>(ok_layout);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::merge<heads, d_k, d_all>(per_head);
  (void)bad;
#endif
}
