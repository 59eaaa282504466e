// Compile-fail case: a mask [keys, batch] is not in the order of scores [batch, heads, tgt, keys].
// expect: attn::grad::softmax: the bias's dimensions must appear in the scores' shape, in the same order

#include "dims.hpp"

#include <attn/cpu.hpp>
#include <attn/grad/softmax.hpp>

using keys = attn::dim<"keys">;

int main() {
  using attn::shape;
  using scores_shape = shape<batch, heads, tgt, keys>;
  attn::grad::variable<float, scores_shape> scores(attn::tensor<float, scores_shape>(2, 3, 3));
  attn::tensor<float, shape<batch, tgt, keys>> mask(2, 3, 3);
  attn::tensor<float, shape<keys, batch>> transposed(3, 2);
  auto ok = attn::grad::softmax<keys>(nullptr, scores, 1.0f, mask);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::grad::softmax<keys>(nullptr, scores, 1.0f, transposed);
  (void)bad;
#endif
}
