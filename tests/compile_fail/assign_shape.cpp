// Compile-fail case: Assigning a [batch, src] expression to a [batch, tgt] tensor.
// expect: attn::assign: the expression's shape differs from the destination's

#include <attn/attn.hpp>

using batch = attn::dim<"batch">;
using tgt = attn::dim<"tgt">;
using src = attn::dim<"src">;
using heads = attn::dim<"heads", 8>;
using d_k = attn::dim<"d_k", 32>;
using d_model = attn::dim<"d_model", 512>;
using d_ff = attn::dim<"d_ff", 2048>;

int main() {
  attn::tensor<float, attn::shape<batch, src>> x(2, 3);
  attn::tensor<float, attn::shape<batch, src>> y(2, 3);
  attn::tensor<float, attn::shape<batch, tgt>> z(2, 3);
  y = x * 2.0f;
#ifdef ATTN_KO
  z = x * 2.0f;
#endif
}
