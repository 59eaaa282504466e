// Moving between the model's width and its heads (paper §3.2.2): [B, L, heads·d_k] is split
// into [B, heads, L, d_k] for attention, and the heads' outputs are concatenated back.
#pragma once

#include <type_traits>

#include "../expr/layout.hpp"
#include "variable.hpp"

namespace attn::grad {

namespace detail {
/// rename<From, To>(e), or e itself when the names are the same.
template <class From, class To, class E>
auto renamed(const E& e) {
  if constexpr (std::is_same_v<From, To>) return as_operand(e);
  else return rename<From, To>(e);
}
}  // namespace detail

/// [B, L, Width] → [B, Heads, As, Depth] with Width = Heads·Depth. The length may take another
/// name As (keys and values use a name distinct from the queries' length).
template <class Heads, class Depth, class As, class T, class B, class L, class Width, class Device>
variable<T, shape<B, Heads, As, Depth>, Device> split_heads(tape* t,
                                                            const variable<T, shape<B, L, Width>, Device>& x) {
  variable<T, shape<B, Heads, As, Depth>, Device> y(
      permute<B, Heads, As, Depth>(split<Width, Heads, Depth>(detail::renamed<L, As>(x.value()))),
      recording(t, x));
  if (y.requires_grad()) {
    t->record([x = x.without_value(), y = y.without_value()] {
      if (y.has_grad())
        x.accumulate(detail::renamed<As, L>(merge<Heads, Depth, Width>(permute<B, As, Heads, Depth>(y.grad()))));
    });
  }
  return y;
}

/// [B, Heads, L, Depth] → [B, L, Width]: the concatenation of the heads.
template <class Width, class T, class B, class Heads, class L, class Depth, class Device>
variable<T, shape<B, L, Width>, Device> merge_heads(tape* t,
                                                    const variable<T, shape<B, Heads, L, Depth>, Device>& x) {
  variable<T, shape<B, L, Width>, Device> y(merge<Heads, Depth, Width>(permute<B, L, Heads, Depth>(x.value())),
                                           recording(t, x));
  if (y.requires_grad()) {
    t->record([x = x.without_value(), y = y.without_value()] {
      if (y.has_grad()) x.accumulate(permute<B, Heads, L, Depth>(split<Width, Heads, Depth>(y.grad())));
    });
  }
  return y;
}

}  // namespace attn::grad
