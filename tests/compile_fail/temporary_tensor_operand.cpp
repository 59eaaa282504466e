// Compile-fail case: An expression over a temporary tensor would dangle once the statement ends.
// expect: attn: an expression cannot keep a temporary tensor alive; name it first

#include "dims.hpp"

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
