// Compile-fail case: Slicing a static dimension would change a size that is part of its type.
// expect: attn::slice: only a dynamic dimension can be sliced

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
  attn::tensor<float, attn::shape<tgt, d_model>> x(5);
  auto ok = attn::slice<tgt>(x, 1, 2);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::slice<d_model>(x, 0, 64);
  (void)bad;
#endif
}
