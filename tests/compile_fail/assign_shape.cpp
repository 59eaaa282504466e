// Compile-fail case: Assigning a [batch, src] expression to a [batch, tgt] tensor.
// expect: attn::assign: the expression's shape differs from the destination's

#include <attn/attn.hpp>  // assignment is checked by the executor

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, src>> x(2, 3);
  attn::tensor<float, attn::shape<batch, src>> y(2, 3);
  attn::tensor<float, attn::shape<batch, tgt>> z(2, 3);
  y = x * 2.0f;
#ifdef ATTN_KO
  z = x * 2.0f;
#endif
}
