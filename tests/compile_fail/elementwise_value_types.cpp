// Compile-fail case: float and double operands are not mixed silently: cast one.
// expect: attn::elementwise: operand value types differ

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
  attn::tensor<float, attn::shape<batch, d_k>> x(2);
  attn::tensor<double, attn::shape<batch, d_k>> y(2);
  auto ok = attn::cast<double>(x) + y;
  (void)ok;
#ifdef ATTN_KO
  auto bad = x + y;
  (void)bad;
#endif
}
