// Dropout's mask as a leaf of an expression (paper §5.4): each element kept, as 1 / (1 − p), or
// dropped, as 0, by the counter-based stream's number at its own row-major index. A backend
// computes it where the expression reads it, so `x * dropout_mask(...)` is one pass that reads x
// and writes the result, where a mask in memory was written, then read, once forward and once
// backward (a float an element: 16 bytes of traffic an element for every dropout of a step).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "../core/random.hpp"
#include "expression.hpp"

namespace attn {

namespace expr {

/// numbers.uniform(first + i) ≥ drop ? kept : 0 at row-major index i, in accumulate_t<T>: a
/// leaf that reads no memory.
template <element T, shape_type S, device Device>
struct dropout_mask {
  using value_type = T;
  using shape_type = S;
  using device_type = Device;

  random_stream numbers;
  std::uint64_t first;  // the stream's counter at index 0
  double drop;          // p
  accumulate_t<T> kept;
  attn::extents<S> sizes;

  const attn::extents<S>& extents() const { return sizes; }
  template <class F>
  void for_each_child(F&&) const {}
};

}  // namespace expr

/// Dropout's mask over `sizes`: element i kept with probability 1 − p, as 1 / (1 − p), by the
/// stream's number at counter first + i (the numbers `numbers.take(sizes.size())` reserved), on
/// every device.
template <element T, device Device = cpu, shape_type S>
auto dropout_mask(const extents<S>& sizes, double p, const random_stream& numbers, std::uint64_t first) {
  if (!(p >= 0.0 && p < 1.0))
    throw std::invalid_argument("attn::dropout_mask: p must be in [0, 1), got " + std::to_string(p));
  return expr::dropout_mask<T, S, Device>{numbers, first, p, static_cast<accumulate_t<T>>(1.0 / (1.0 - p)), sizes};
}

}  // namespace attn
