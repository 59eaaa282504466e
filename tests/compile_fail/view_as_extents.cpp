// Compile-fail case: viewing a [tgt, d_model] tensor as [tgt, d_ff]: view_as renames, it does not
// reshape, so the shapes' extents must agree position by position.
// expect: attn::extents::renamed: the shapes' extents differ

#include "dims.hpp"

int main() {
  using width = attn::dim<"width", 512>;
  attn::tensor<float, attn::shape<tgt, d_model>> x(2);
  auto ok = attn::view_as<attn::shape<src, width>>(x.view());
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::view_as<attn::shape<src, d_ff>>(x.view());
  (void)bad;
#endif
}
