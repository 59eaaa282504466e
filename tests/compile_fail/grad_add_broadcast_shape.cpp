// Compile-fail case: a positional table [d_model, tgt] cannot be added along batch to [batch, tgt, d_model].
// expect: attn::grad::add_broadcast: the added operand must have the shape of x without the repeated dimension

#include "dims.hpp"

#include <attn/cpu.hpp>
#include <attn/grad/elementwise.hpp>

int main() {
  using attn::shape;
  attn::grad::variable<float, shape<batch, tgt, d_model>> x(attn::tensor<float, shape<batch, tgt, d_model>>(2, 3));
  attn::grad::variable<float, shape<tgt, d_model>> table(attn::tensor<float, shape<tgt, d_model>>(3));
  attn::grad::variable<float, shape<d_model, tgt>> transposed(attn::tensor<float, shape<d_model, tgt>>(3));
  auto ok = attn::grad::add_broadcast<batch>(nullptr, x, table);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::grad::add_broadcast<batch>(nullptr, x, transposed);
  (void)bad;
#endif
}
