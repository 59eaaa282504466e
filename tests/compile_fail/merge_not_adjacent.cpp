// Compile-fail case: Merging heads and d_k when they are not adjacent (the permute back was forgotten).
// expect: attn::merge: the merged dimensions must be adjacent, outer before inner

#include "dims.hpp"

int main() {
  using d_all = attn::dim<"d_all", 256>;
  attn::tensor<float, attn::shape<batch, tgt, heads, d_k>> ok_layout(2, 3);
  attn::tensor<float, attn::shape<batch, heads, tgt, d_k>> per_head(2, 3);
  auto ok = attn::merge<heads, d_k, d_all>(ok_layout);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::merge<heads, d_k, d_all>(per_head);
  (void)bad;
#endif
}
