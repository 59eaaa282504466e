// The gradients' global norm, which decides whether a step is usable (finite) and, with
// clipping on, how far its gradients are scaled down.
#pragma once

#include <cmath>
#include <span>
#include <vector>

#include "../core/primitives.hpp"
#include "../grad/parameter.hpp"

namespace attn::train {

/// ‖g‖₂ over every gradient of the list, accumulated in double; NaN or ∞ when any is.
template <class T, class Device>
double gradient_norm(const grad::parameter_list<T, Device>& parameters) {
  std::vector<flat_array<const T>> gradients;
  for (const auto& p : parameters.refs()) gradients.push_back({p.grad, p.size});
  return std::sqrt(primitives<Device>::sum_of_squares(std::span<const flat_array<const T>>(gradients)));
}

/// Scales every gradient by `factor`.
template <class T, class Device>
void scale_gradients(grad::parameter_list<T, Device>& parameters, double factor) {
  std::vector<flat_array<T>> gradients;
  for (const auto& p : parameters.refs()) gradients.push_back({p.grad, p.size});
  primitives<Device>::scale(std::span<const flat_array<T>>(gradients), factor);
}

/// Scales the gradients down so that their norm is at most `max_norm` (Pascanu et al. 2013);
/// returns the norm before clipping. A non-finite norm leaves them as they are.
template <class T, class Device>
double clip_gradient_norm(grad::parameter_list<T, Device>& parameters, double max_norm) {
  const double norm = gradient_norm(parameters);
  if (std::isfinite(norm) && max_norm > 0 && norm > max_norm) scale_gradients(parameters, max_norm / norm);
  return norm;
}

}  // namespace attn::train
