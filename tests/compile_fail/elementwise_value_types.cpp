// Compile-fail case: float and double operands are not mixed silently: cast one.
// expect: attn::elementwise: operand value types differ

#include "dims.hpp"

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
