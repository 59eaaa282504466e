// Moving between the model's width and its heads (paper §3.2.2): [B, L, heads·d_k] is split
// into [B, heads, L, d_k] for attention, and the heads' outputs are concatenated back.
#pragma once

#include <type_traits>

#include "../expr/layout.hpp"
#include "variable.hpp"

namespace attn::grad {

namespace detail {
/// The dimensions of a head split under names of their own, each with its extent, so that the
/// permutations are compiled once for every naming of the lengths (queries', keys', the
/// encoder's and the decoder's) with the same extents (docs/model.md, "Compile time").
template <index_t Batch, index_t Heads, index_t Length, index_t Depth, index_t Width>
struct heads_names {
  using batch = dim<"heads.batch", Batch>;
  using heads = dim<"heads.heads", Heads>;
  using length = dim<"heads.length", Length>;
  using depth = dim<"heads.depth", Depth>;
  using width = dim<"heads.width", Width>;
  using merged = shape<batch, length, width>;
  using split = shape<batch, heads, length, depth>;
};
template <class B, class Heads, class L, class Depth, class Width>
using heads_names_of = heads_names<B::extent, Heads::extent, L::extent, Depth::extent, Width::extent>;

/// [batch, length, width] → [batch, heads, length, depth], under heads_names.
template <class N, class E>
auto split_heads_of(const E& x) {
  return permute<typename N::batch, typename N::heads, typename N::length, typename N::depth>(
      split<typename N::width, typename N::heads, typename N::depth>(x));
}
/// [batch, heads, length, depth] → [batch, length, width], under heads_names.
template <class N, class E>
auto merge_heads_of(const E& x) {
  return merge<typename N::heads, typename N::depth, typename N::width>(
      permute<typename N::batch, typename N::length, typename N::heads, typename N::depth>(x));
}

/// The split's and the merge's extent rules under the caller's names, before their work under
/// heads_names: Width = Heads·Depth.
template <class Width, class Heads, class Depth, class V>
void check_heads(const V& x) {
  static_assert(!(Width::is_static && Heads::is_static && Depth::is_static) ||
                    Heads::extent * Depth::extent == Width::extent,
                "attn::grad::split_heads, merge_heads: the heads' extents do not multiply to the width's");
  // A split of a dynamic extent is checked when its sizes are known (merging has nothing to check).
  if constexpr (!(Width::is_static && Heads::is_static && Depth::is_static) &&
                has_dim<typename V::shape_type, Width>)
    (void)split<Width, Heads, Depth>(x.value());
}
}  // namespace detail

/// [B, L, Width] → [B, Heads, As, Depth] with Width = Heads·Depth. The length may take another
/// name As, of the same extent (keys and values use a name distinct from the queries' length).
template <class Heads, class Depth, class As, class T, class B, class L, class Width, class Device>
variable<T, shape<B, Heads, As, Depth>, Device> split_heads(tape* t,
                                                            const variable<T, shape<B, L, Width>, Device>& x) {
  static_assert(L::extent == As::extent, "attn::grad::split_heads: the length's new name has another extent");
  detail::check_heads<Width, Heads, Depth>(x);
  using names = detail::heads_names_of<B, Heads, As, Depth, Width>;
  variable<T, shape<B, Heads, As, Depth>, Device> y(
      evaluate_as<shape<B, Heads, As, Depth>>(
          detail::split_heads_of<names>(value_as<typename names::merged>(x))),
      recording(t, x));
  if (y.requires_grad()) {
    t->record([x = x.without_value(), y = y.without_value()] {
      if (y.has_grad())
        accumulate_as<typename names::merged>(
            x, detail::merge_heads_of<names>(gradient_as<typename names::split>(y)));
    });
  }
  return y;
}

/// [B, Heads, L, Depth] → [B, L, Width]: the concatenation of the heads.
template <class Width, class T, class B, class Heads, class L, class Depth, class Device>
variable<T, shape<B, L, Width>, Device> merge_heads(tape* t,
                                                    const variable<T, shape<B, Heads, L, Depth>, Device>& x) {
  detail::check_heads<Width, Heads, Depth>(x);
  using names = detail::heads_names_of<B, Heads, L, Depth, Width>;
  variable<T, shape<B, L, Width>, Device> y(
      evaluate_as<shape<B, L, Width>>(
          detail::merge_heads_of<names>(value_as<typename names::split>(x))),
      recording(t, x));
  if (y.requires_grad()) {
    t->record([x = x.without_value(), y = y.without_value()] {
      if (y.has_grad())
        accumulate_as<typename names::split>(
            x, detail::split_heads_of<names>(gradient_as<typename names::merged>(y)));
    });
  }
  return y;
}

}  // namespace attn::grad
