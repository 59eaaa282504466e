// Compile-fail case: A permute that drops a dimension (and names one the tensor lacks).
// expect: attn::permute: the new order must name each dimension of the operand once

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
  attn::tensor<float, attn::shape<batch, tgt, d_k>> x(2, 3);
  auto ok = attn::permute<d_k, batch, tgt>(x);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::permute<d_k, batch, src>(x);
  (void)bad;
#endif
}
