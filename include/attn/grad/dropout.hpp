// Dropout (Srivastava et al., 2014; paper §5.4): each element kept with probability 1 − p and
// scaled by 1 / (1 − p), from a seeded counter-based stream, so runs repeat exactly.
#pragma once

#include "../core/primitives.hpp"
#include "../core/random.hpp"
#include "../expr/elementwise.hpp"
#include "variable.hpp"

namespace attn::grad {

/// x with dropout applied; x itself when p is 0 (evaluation, or a configuration without it).
/// Draws x.size() numbers from the stream.
template <class T, class S, class Device>
variable<T, S, Device> dropout(tape* t, const variable<T, S, Device>& x, double p, random_stream& stream) {
  if (p <= 0.0) return x;
  if (p >= 1.0) throw std::invalid_argument("attn::grad::dropout: p must be below 1, got " + std::to_string(p));
  tensor<T, S, Device> mask(x.extents(), uninitialized);
  primitives<Device>::dropout_mask(mask.data(), mask.size(), p, stream,
                                   stream.take(static_cast<std::uint64_t>(mask.size())));
  variable<T, S, Device> y(x.value() * mask, recording(t, x));
  if (y.requires_grad()) {
    t->record([x, y, mask = std::move(mask)] {
      if (y.has_grad()) x.accumulate(y.grad() * mask);
    });
  }
  return y;
}

}  // namespace attn::grad
