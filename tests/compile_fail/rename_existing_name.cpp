// Compile-fail case: Renaming src to tgt in a tensor that already has tgt.
// expect: attn::rename: the new name is already in the shape

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
  using src_k = attn::dim<"src_k">;
  attn::tensor<float, attn::shape<tgt, src>> x(2, 3);
  auto ok = attn::rename<src, src_k>(x);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::rename<src, tgt>(x);
  (void)bad;
#endif
}
