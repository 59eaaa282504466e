// Layer normalisation over one dimension (Ba et al., 2016; paper §3.1): every position's
// features normalised to mean 0 and variance 1, then scaled by gamma and shifted by beta.
#pragma once

#include "../core/primitives.hpp"
#include "variable.hpp"

namespace attn::grad {

/// y = (x − mean) / √(var + epsilon) · gamma + beta over D, for x [B, L, D]: each direction one
/// launch of the device's row primitives, the rows' mean and 1/√(var + ε) kept between them (in
/// the compute type: float for 16-bit x, whose statistics are never rounded to 16 bits).
template <class T, class B, class L, class D, class Device>
variable<T, shape<B, L, D>, Device> layer_norm(tape* t, const variable<T, shape<B, L, D>, Device>& x,
                                               const variable<T, shape<D>, Device>& gamma,
                                               const variable<T, shape<D>, Device>& beta,
                                               std::type_identity_t<accumulate_t<T>> epsilon = accumulate_t<T>(1e-6)) {
  using row_shape = shape<B, L>;
  check_common_extents("attn::grad::layer_norm", gamma.extents(), x.extents());
  check_common_extents("attn::grad::layer_norm", beta.extents(), x.extents());
  const index_t width = x.extents().template extent<D>();
  const extents<row_shape> row_sizes(gather_extents<row_shape>(x.extents()));
  const index_t rows = row_sizes.size();
  using A = accumulate_t<T>;
  tensor<A, row_shape, Device> row_mean(row_sizes, uninitialized), row_rstd(row_sizes, uninitialized);
  variable<T, shape<B, L, D>, Device> y(tensor<T, shape<B, L, D>, Device>(x.extents(), uninitialized),
                                        recording(t, x, gamma, beta));
  primitives<Device>::layer_norm_rows(y.value().data(), row_mean.data(), row_rstd.data(), x.value().data(),
                                      gamma.value().data(), beta.value().data(), rows, width, epsilon);
  if (y.requires_grad()) {
    t->record([x, gamma, beta = beta.without_value(), y = y.without_value(), row_mean = std::move(row_mean),
               row_rstd = std::move(row_rstd), rows, width] {
      if (!y.has_grad()) return;
      // The gain and bias gradients are added by the primitive: zero them if none has come yet.
      if (gamma.requires_grad() && !gamma.has_grad()) gamma.zero_grad();
      if (beta.requires_grad() && !beta.has_grad()) beta.zero_grad();
      T* gain_grad = gamma.requires_grad() ? gamma.grad().data() : nullptr;
      T* bias_grad = beta.requires_grad() ? beta.grad().data() : nullptr;
      const auto backward = [&](T* dx, bool add) {
        primitives<Device>::layer_norm_rows_backward(dx, add, gain_grad, bias_grad, y.grad().data(), x.value().data(),
                                                     row_mean.data(), row_rstd.data(), gamma.value().data(), rows,
                                                     width);
      };
      if (x.requires_grad()) x.accumulate_with(backward);
      else backward(nullptr, false);
    });
  }
  return y;
}

}  // namespace attn::grad
