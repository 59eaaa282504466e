// Compile-fail case: Contracting d_model with d_ff: x [batch, d_model] times w [d_ff, d_model].
// expect: attn::matmul: contracted dimensions differ
// expect: {"d_model"}, 512
// expect: {"d_ff"}, 2048

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, d_model>> x(2);
  attn::tensor<float, attn::shape<d_model, d_ff>> w;
  attn::tensor<float, attn::shape<d_ff, d_model>> w_transposed;
  auto ok = attn::matmul(x, w);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::matmul(x, w_transposed);
  (void)bad;
#endif
}
