// Dropout (Srivastava et al., 2014; paper §5.4): each element kept with probability 1 − p and
// scaled by 1 / (1 − p), from a seeded counter-based stream, so runs repeat exactly.
#pragma once

#include <type_traits>

#include "../core/random.hpp"
#include "../expr/dropout_mask.hpp"
#include "../expr/elementwise.hpp"
#include "variable.hpp"

namespace attn::grad {

/// x with dropout applied; x itself when p is 0 (evaluation, or a configuration without it).
/// Draws x.size() numbers from the stream. For 16-bit x the mask is computed in float, since
/// 1/(1 − p) is rarely a 16-bit number: each kept element is scaled in float and rounded once.
/// The mask is never stored: both passes compute it where they multiply by it
/// (expr/dropout_mask.hpp), the backward pass from the same counters, so nothing is held
/// between the passes.
template <class T, class S, class Device>
variable<T, S, Device> dropout(tape* t, const variable<T, S, Device>& x, double p, random_stream& stream) {
  if (p <= 0.0) return x;
  if (p >= 1.0) throw std::invalid_argument("attn::grad::dropout: p must be below 1, got " + std::to_string(p));
  using M = accumulate_t<T>;
  const auto mask = attn::dropout_mask<M, Device>(x.extents(), p, stream,
                                                  stream.take(static_cast<std::uint64_t>(x.extents().size())));
  const auto masked = [mask](const auto& z) {
    if constexpr (std::is_same_v<M, T>) return z * mask;
    else return attn::cast<T>(attn::cast<M>(z) * mask);
  };
  variable<T, S, Device> y(masked(x.value()), recording(t, x));
  if (y.requires_grad()) {
    t->record([x = x.without_value(), y = y.without_value(), masked] {
      if (y.has_grad()) x.accumulate(masked(y.grad()));
    });
  }
  return y;
}

}  // namespace attn::grad
