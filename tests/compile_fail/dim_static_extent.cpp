// Compile-fail case: A static extent of 0.
// expect: attn::dim: a static extent must be positive

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
  attn::tensor<float, attn::shape<attn::dim<"one", 1>>> ok;
  (void)ok;
#ifdef ATTN_KO
  attn::tensor<float, attn::shape<attn::dim<"none", 0>>> bad;
  (void)bad;
#endif
}
