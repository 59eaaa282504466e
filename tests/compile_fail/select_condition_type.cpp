// Compile-fail case: where() needs a bool condition: a comparison, not a float mask.
// expect: attn::select: the condition must be a bool expression

#include "dims.hpp"

int main() {
  attn::tensor<float, attn::shape<batch, src>> x(2, 3);
  attn::tensor<float, attn::shape<batch, src>> mask(2, 3);
  auto ok = attn::where(mask > 0.0f, x, -1e9f);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::where(mask, x, -1e9f);
  (void)bad;
#endif
}
