// Coordinates as values: the index of each element along a dimension, so that an expression
// may depend on where an element is (ALiBi's −slope·|i − j|, a window of restricted attention,
// a relative-position bias) and still lower to one fused pass on every device.
#pragma once

#include "broadcast.hpp"
#include "expression.hpp"

namespace attn {

namespace expr {

/// start, start + 1, …, start + count − 1 along D: a leaf that reads no memory. Computed in
/// accumulate_t<T> (positions stay exact in float for 16-bit T: bfloat16 holds none past 256).
template <element T, dimension D, device Device>
struct iota {
  using value_type = T;
  using shape_type = shape<D>;
  using device_type = Device;

  accumulate_t<T> start;
  attn::extents<shape<D>> sizes;

  const attn::extents<shape<D>>& extents() const { return sizes; }
  template <class F>
  void for_each_child(F&&) const {}
};

}  // namespace expr

/// The positions 0 … count − 1 along D, shifted by `start` (a step of incremental decoding
/// whose one query sits at position `start`).
template <element T, dimension D, device Device = cpu>
auto iota(index_t count, accumulate_t<T> start = accumulate_t<T>{0}) {
  return expr::iota<T, D, Device>{start, extents<shape<D>>::from_array({count})};
}

/// Every element of `like` replaced by its index along D (plus `start`): `index_along<Q>(s) −
/// index_along<K>(s)` is i − j over scores s [B, H, Q, K].
template <dimension D, operand Like>
auto index_along(const Like& like, accumulate_t<value_t<Like>> start = 0) {
  static_assert(has_dim<shape_t<Like>, D>, "attn::index_along: the dimension is not in the operand's shape");
  return broadcast_like(iota<value_t<Like>, D, device_t<Like>>(like.extents().template extent<D>(), start), like);
}

}  // namespace attn
