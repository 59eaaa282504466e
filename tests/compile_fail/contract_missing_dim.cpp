// Compile-fail case: Contracting d_ff, which the activations [batch, d_model] do not have.
// expect: attn::contract: the contracted dimension is missing from the first operand

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
  attn::tensor<float, attn::shape<batch, d_model>> x(2);
  attn::tensor<float, attn::shape<d_model, d_ff>> w;
  auto ok = attn::contract<d_model>(x, w);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::contract<d_ff>(x, w);
  (void)bad;
#endif
}
