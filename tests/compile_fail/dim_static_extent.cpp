// Compile-fail case: A static extent of 0.
// expect: attn::dim: a static extent must be positive

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<attn::dim<"one", 1>>> ok;
  (void)ok;
#ifdef ATTN_KO
  attn::tensor<float, attn::shape<attn::dim<"none", 0>>> bad;
  (void)bad;
#endif
}
