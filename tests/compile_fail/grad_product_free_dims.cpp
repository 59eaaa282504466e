// Compile-fail case: a differentiable product needs one free dimension on each side (q·kᵀ, weights·v).
// expect: attn::grad::product: each operand must have exactly one free dimension

#include "dims.hpp"

#include <attn/cpu.hpp>
#include <attn/grad/product.hpp>

int main() {
  using attn::shape;
  attn::grad::variable<float, shape<batch, heads, tgt, d_k>> q(attn::tensor<float, shape<batch, heads, tgt, d_k>>(2, 3));
  attn::grad::variable<float, shape<batch, heads, src, d_k>> k(attn::tensor<float, shape<batch, heads, src, d_k>>(2, 4));
  attn::grad::variable<float, shape<d_k, d_model, d_ff>> w{attn::tensor<float, shape<d_k, d_model, d_ff>>{}};
  auto ok = attn::grad::product<d_k>(nullptr, q, k);
  (void)ok;
#ifdef ATTN_KO
  auto bad = attn::grad::product<d_k>(nullptr, q, w);
  (void)bad;
#endif
}
