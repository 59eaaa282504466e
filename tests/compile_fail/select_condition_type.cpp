// Compile-fail case: where() needs a bool condition: a comparison, not a float mask.
// expect: attn::select: the condition must be a bool expression

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
  attn::tensor<float, attn::shape<batch, src>> x(2, 3);
  attn::tensor<float, attn::shape<batch, src>> mask(2, 3);
  auto ok = attn::where(mask > 0.0f, x, -1e9f);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::where(mask, x, -1e9f);
  (void)bad;
#endif
}
