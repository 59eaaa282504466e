// Compile-fail case: Renaming src to tgt in a tensor that already has tgt.
// expect: attn::rename: the new name is already in the shape

#include "dims.hpp"

int main() {
  using src_k = attn::dim<"src_k">;
  attn::tensor<float, attn::shape<tgt, src>> x(2, 3);
  auto ok = attn::rename<src, src_k>(x);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::rename<src, tgt>(x);
  (void)bad;
#endif
}
