// Dropout's mask as a leaf of an expression (paper §5.4): each element kept, as 1 / (1 − p), or
// dropped, as 0, by the counter-based stream's number at its own row-major index. A backend
// computes it where the expression reads it, so `x * dropout_mask(...)` is one pass that reads x
// and writes the result, where a mask in memory was written, then read, once forward and once
// backward (a float an element: 16 bytes of traffic an element for every dropout of a step).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "../core/config.hpp"
#include "../core/random.hpp"
#include "expression.hpp"

namespace attn {

/// The mask's element at row-major index i: numbers.uniform(first + i) ≥ drop ? kept : 0. Both
/// backends call it (the CPU's Eigen op, the GPU's plan), so the masks are the same numbers.
template <class C>
struct dropout_draws {
  random_stream numbers;
  std::uint64_t first;  // the stream's counter at index 0
  double drop;          // p
  C kept;               // 1 / (1 − p)

  ATTN_HOST_DEVICE C operator()(std::uint64_t i) const {
    return numbers.uniform(first + i) >= drop ? kept : C{0};
  }
};

namespace expr {

/// Dropout's mask, in accumulate_t<T>: a leaf that reads no memory.
template <element T, shape_type S, device Device>
struct dropout_mask {
  using value_type = T;
  using shape_type = S;
  using device_type = Device;

  dropout_draws<accumulate_t<T>> draws;
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
  using C = accumulate_t<T>;
  return expr::dropout_mask<T, S, Device>{dropout_draws<C>{numbers, first, p, static_cast<C>(1.0 / (1.0 - p))}, sizes};
}

}  // namespace attn
