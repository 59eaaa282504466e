// Dropout (Srivastava et al., 2014; paper §5.4): each element kept with probability 1 − p and
// scaled by 1 / (1 − p), from a seeded counter-based stream, so runs repeat exactly.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../core/random.hpp"
#include "../expr/dropout_mask.hpp"
#include "../expr/elementwise.hpp"
#include "elementwise.hpp"
#include "variable.hpp"

namespace attn::grad {

namespace detail {

/// Dropout's mask over `sizes`, the next sizes.size() numbers of the stream, and the product by
/// it: `masked(z)` is z ⊙ mask, computed in float and rounded once for 16-bit T. A p of 1 or
/// more is refused by attn::dropout_mask, before the stream moves.
template <class T, class Device, class S>
auto dropout_product(const attn::extents<S>& sizes, double p, random_stream& stream) {
  using M = accumulate_t<T>;
  const auto mask = attn::dropout_mask<M, Device>(sizes, p, stream, stream.position());  // checks p first
  stream.take(static_cast<std::uint64_t>(sizes.size()));
  return [mask](const auto& z) {
    if constexpr (std::is_same_v<M, T>) return z * mask;
    else return attn::cast<T>(attn::cast<M>(z) * mask);
  };
}

}  // namespace detail

/// x with dropout applied; x itself when p is 0 (evaluation, or a configuration without it).
/// Draws x.size() numbers from the stream. For 16-bit x the mask is computed in float, since
/// 1/(1 − p) is rarely a 16-bit number: each kept element is scaled in float and rounded once.
/// The mask is never stored: both passes compute it where they multiply by it
/// (expr/dropout_mask.hpp), the backward pass from the same counters, so nothing is held
/// between the passes.
template <class T, class S, class Device>
variable<T, S, Device> dropout(tape* t, const variable<T, S, Device>& x, double p, random_stream& stream) {
  if (p <= 0.0) return x;
  using P = positional<S>;  // the work under names of its own (view_as), once for every naming of S
  const auto masked = detail::dropout_product<T, Device>(extents<P>::renamed(x.extents()), p, stream);
  variable<T, S, Device> y(evaluate_as<S>(masked(value_as<P>(x))), recording(t, x));
  if (y.requires_grad()) {
    t->record([x = x.without_value(), y = y.without_value(), masked] {
      if (y.has_grad()) accumulate_as<P>(x, masked(gradient_as<P>(y)));
    });
  }
  return y;
}

/// x + dropout(y, p), the sum of a residual connection (paper §5.4: dropout on each sub-layer's
/// output before it is added to the sub-layer's input), as one pass each way: the same numbers
/// as add(x, dropout(y)) and the same sums (unless a compiler fuses the product into the
/// addition: a GPU's fma, in float), without the dropped-out y and its gradient in memory.
template <class T, class S, class Device>
variable<T, S, Device> add_dropout(tape* t, const variable<T, S, Device>& x, const variable<T, S, Device>& y,
                                   double p, random_stream& stream) {
  if (p <= 0.0) return add(t, x, y);
  using P = positional<S>;
  check_common_extents("attn::grad::add_dropout", x.extents(), y.extents());
  const auto masked = detail::dropout_product<T, Device>(extents<P>::renamed(y.extents()), p, stream);
  variable<T, S, Device> sum(evaluate_as<S>(value_as<P>(x) + masked(value_as<P>(y))), recording(t, x, y));
  if (sum.requires_grad()) {
    t->record([x = x.without_value(), y = y.without_value(), sum = sum.without_value(), masked] {
      if (!sum.has_grad()) return;
      if (x.requires_grad()) accumulate_as<P>(x, gradient_as<P>(sum));
      if (y.requires_grad()) accumulate_as<P>(y, masked(gradient_as<P>(sum)));
    });
  }
  return sum;
}

}  // namespace attn::grad
