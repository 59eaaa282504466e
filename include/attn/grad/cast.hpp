// Conversion of a variable's element type: where a parameter kept in a wider type (mixed
// precision's master weights, nn/precision.hpp) enters a computation in a narrower one.
#pragma once

#include <concepts>

#include "../expr/elementwise.hpp"
#include "variable.hpp"

namespace attn::grad {

/// x's values as To; the gradient comes back converted to x's type and is added to x's.
/// Without a conversion to make, x itself (no copy, nothing recorded). Either way the tape
/// notes that x is read from here on: how modules read their parameters, which tells the tape
/// when a parameter's gradient is complete (tape::note_read).
template <element To, element From, class S, class Device>
variable<To, S, Device> cast(tape* t, const variable<From, S, Device>& x) {
  if (t != nullptr && x.requires_grad()) t->note_read(x.identity());
  if constexpr (std::same_as<To, From>) {
    return x;
  } else {
    variable<To, S, Device> y(attn::cast<To>(x.value()), recording(t, x));
    if (y.requires_grad()) {
      t->record([x = x.without_value(), y = y.without_value()] {
        if (y.has_grad()) x.accumulate(attn::cast<From>(y.grad()));
      });
    }
    return y;
  }
}

}  // namespace attn::grad
