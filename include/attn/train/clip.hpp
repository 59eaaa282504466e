// The gradients' global norm, which decides whether a step is usable (finite) and, with
// clipping on, how far its gradients are scaled down.
#pragma once

#include <cmath>

#include "../grad/parameter.hpp"

namespace attn::train {

/// ‖g‖₂ over every gradient of the list, accumulated in double; NaN or ∞ when any is.
template <class T>
double gradient_norm(const grad::parameter_list<T>& parameters) {
  double squares = 0;
  for (const auto& p : parameters.refs())
    for (index_t i = 0; i < p.size; ++i) squares += double(p.grad[i]) * double(p.grad[i]);
  return std::sqrt(squares);
}

/// Scales every gradient by `factor`.
template <class T>
void scale_gradients(grad::parameter_list<T>& parameters, double factor) {
  for (auto& p : parameters.refs())
    for (index_t i = 0; i < p.size; ++i) p.grad[i] = T(double(p.grad[i]) * factor);
}

/// Scales the gradients down so that their norm is at most `max_norm` (Pascanu et al. 2013);
/// returns the norm before clipping. A non-finite norm leaves them as they are.
template <class T>
double clip_gradient_norm(grad::parameter_list<T>& parameters, double max_norm) {
  const double norm = gradient_norm(parameters);
  if (std::isfinite(norm) && max_norm > 0 && norm > max_norm) scale_gradients(parameters, max_norm / norm);
  return norm;
}

}  // namespace attn::train
