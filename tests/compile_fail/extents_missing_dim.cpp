// Compile-fail case: Asking a tensor for the size of a dimension it does not have.
// expect: attn::extents: dimension not in shape

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, d_k>> x(2);
  auto ok = x.extents().extent<batch>();
  (void)ok;
#ifdef ATTN_KO
  auto bad = x.extents().extent<heads>();
  (void)bad;
#endif
}
