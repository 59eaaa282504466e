// Compile-fail case: An expression over a temporary tensor would dangle once the statement ends.
// expect: attn: an expression cannot keep a temporary tensor alive; name it first

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
  using row = attn::shape<batch, d_k>;
  attn::tensor<float, row> named(2);
  auto ok = attn::exp(named);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::exp(attn::tensor<float, row>(2));
  (void)bad;
#endif
}
