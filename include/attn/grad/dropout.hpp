// Dropout (Srivastava et al., 2014; paper §5.4): each element kept with probability 1 − p and
// scaled by 1 / (1 − p), from a seeded counter-based stream, so runs repeat exactly.
#pragma once

#include <type_traits>

#include "../core/primitives.hpp"
#include "../core/random.hpp"
#include "../expr/elementwise.hpp"
#include "variable.hpp"

namespace attn::grad {

/// x with dropout applied; x itself when p is 0 (evaluation, or a configuration without it).
/// Draws x.size() numbers from the stream. For 16-bit x the mask is kept in float, since
/// 1/(1 − p) is rarely a 16-bit number: each kept element is scaled in float and rounded once.
/// The backward pass draws the same numbers again (the stream is counter-based) instead of
/// keeping the mask: no memory is held between the passes, for one more pass over a mask.
template <class T, class S, class Device>
variable<T, S, Device> dropout(tape* t, const variable<T, S, Device>& x, double p, random_stream& stream) {
  if (p <= 0.0) return x;
  if (p >= 1.0) throw std::invalid_argument("attn::grad::dropout: p must be below 1, got " + std::to_string(p));
  using M = accumulate_t<T>;
  const random_stream numbers = stream;
  const std::uint64_t start = stream.take(static_cast<std::uint64_t>(x.extents().size()));
  const auto mask_of = [numbers, start, p](const attn::extents<S>& extents) {
    tensor<M, S, Device> mask(extents, uninitialized);
    primitives<Device>::dropout_mask(mask.data(), mask.size(), p, numbers, start);
    return mask;
  };
  const auto masked = [](const auto& z, const tensor<M, S, Device>& mask) {
    if constexpr (std::is_same_v<M, T>) return z * mask;
    else return attn::cast<T>(attn::cast<M>(z) * mask);
  };
  variable<T, S, Device> y(masked(x.value(), mask_of(x.extents())), recording(t, x));
  if (y.requires_grad()) {
    t->record([x = x.without_value(), y = y.without_value(), mask_of, masked] {
      if (y.has_grad()) x.accumulate(masked(y.grad(), mask_of(y.extents())));
    });
  }
  return y;
}

}  // namespace attn::grad
