// Broadcast: repeat an operand along the dimensions of a larger shape (a mask over heads and
// queries, a bias over batch and positions). Never implicit: elementwise shapes must match.
#pragma once

#include <utility>

#include "expression.hpp"

namespace attn {

namespace expr {

/// A viewed as shape To: A's dimensions keep their positions' data, the others repeat.
template <shape_type To, expression A>
struct broadcast {
  using value_type = typename A::value_type;
  using shape_type = To;
  using device_type = typename A::device_type;

  A a;
  attn::extents<To> sizes;

  broadcast(A a_, const attn::extents<To>& sizes_) : a(a_), sizes(sizes_) {
    static_assert(meta::is_subsequence<typename A::shape_type::dims, typename To::dims>,
                  "attn::broadcast: the operand's dimensions must appear in the target shape, "
                  "in the same order");
    check_common_extents("attn::broadcast", a.extents(), sizes);
  }
  const attn::extents<To>& extents() const { return sizes; }
  template <class F>
  void for_each_child(F&& f) const { f(a); }
};

}  // namespace expr

/// Repeats `a` along the dimensions of shape To that it lacks, to the given sizes.
template <shape_type To, operand A>
auto broadcast(A&& a, const extents<To>& sizes) {
  return expr::broadcast<To, operand_t<A>>(as_operand(std::forward<A>(a)), sizes);
}

/// Repeats `a` to the shape and sizes of `like`.
template <operand A, operand Like>
auto broadcast_like(A&& a, const Like& like) {
  return broadcast<shape_t<Like>>(std::forward<A>(a), like.extents());
}

}  // namespace attn
