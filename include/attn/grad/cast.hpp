// Conversion of a variable's element type: where a parameter kept in a wider type (mixed
// precision's master weights, nn/precision.hpp) enters a computation in a narrower one.
#pragma once

#include <concepts>

#include "../expr/elementwise.hpp"
#include "variable.hpp"

namespace attn::grad {

/// x's values as To; the gradient comes back converted to x's type and is added to x's.
/// Without a conversion to make, x itself (no copy, nothing recorded).
template <element To, element From, class S, class Device>
variable<To, S, Device> cast(tape* t, const variable<From, S, Device>& x) {
  if constexpr (std::same_as<To, From>) {
    return x;
  } else {
    variable<To, S, Device> y(attn::cast<To>(x.value()), recording(t, x));
    if (y.requires_grad()) {
      t->record([x, y] {
        if (y.has_grad()) x.accumulate(attn::cast<From>(y.grad()));
      });
    }
    return y;
  }
}

}  // namespace attn::grad
