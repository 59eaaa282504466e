// Layer normalisation over one dimension (Ba et al., 2016; paper §3.1): every position's
// features normalised to mean 0 and variance 1, then scaled by gamma and shifted by beta.
#pragma once

#include "../expr/broadcast.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/layout.hpp"
#include "../expr/reduce.hpp"
#include "linear.hpp"
#include "variable.hpp"

namespace attn::grad {

/// y = (x − mean) / √(var + epsilon) · gamma + beta over D, for x [B, L, D].
template <class T, class B, class L, class D, class Device>
variable<T, shape<B, L, D>, Device> layer_norm(tape* t, const variable<T, shape<B, L, D>, Device>& x,
                                               const variable<T, shape<D>, Device>& gamma,
                                               const variable<T, shape<D>, Device>& beta,
                                               T epsilon = T(1e-6)) {
  const auto& xv = x.value();
  auto row_mean = eval(mean<D>(xv));
  auto centred = xv - broadcast_like(row_mean, xv);
  auto row_rstd = eval(rsqrt(mean<D>(centred * centred) + epsilon));
  variable<T, shape<B, L, D>, Device> y(centred * broadcast_like(row_rstd, xv) * broadcast_like(gamma.value(), xv) +
                                            broadcast_like(beta.value(), xv),
                                        recording(t, x, gamma, beta));
  if (y.requires_grad()) {
    t->record([x, gamma, beta, y, row_mean = std::move(row_mean), row_rstd = std::move(row_rstd)] {
      if (!y.has_grad()) return;
      const auto& dy = y.grad();
      const auto& xv = x.value();
      auto rstd = broadcast_like(row_rstd, xv);
      auto x_hat = (xv - broadcast_like(row_mean, xv)) * rstd;
      if (x.requires_grad()) {
        // dx = rstd · (g − mean(g) − x̂ · mean(g ⊙ x̂)), g = dy ⊙ gamma
        auto g = dy * broadcast_like(gamma.value(), xv);
        const auto g_mean = eval(mean<D>(g));
        const auto gx_mean = eval(mean<D>(g * x_hat));
        x.accumulate(rstd * (g - broadcast_like(g_mean, xv) - x_hat * broadcast_like(gx_mean, xv)));
      }
      if (gamma.requires_grad()) gamma.accumulate(sum<detail::rows>(merge<B, L, detail::rows>(dy * x_hat)));
      if (beta.requires_grad()) beta.accumulate(sum<detail::rows>(merge<B, L, detail::rows>(dy)));
    });
  }
  return y;
}

}  // namespace attn::grad
