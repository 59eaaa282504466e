// Parameter initialisation from a seeded stream, so that a seed fixes the initial model. Values
// are drawn on the host, in one order, and copied to the parameter's device: the same seed
// gives the same model on every device.
#pragma once

#include <cmath>
#include <numbers>
#include <vector>

#include "../core/random.hpp"
#include "../core/transfer.hpp"
#include "../grad/parameter.hpp"

namespace attn::nn {

/// Uniform in [−a, a] with a = √(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010): the authors'
/// tensor2tensor code draws every matrix so ("uniform_unit_scaling": variance scaling over
/// fan_avg, gain 1), fused ones as a whole (see multi_head_attention::fused_width).
template <class T, class S, class Device>
void xavier_uniform(grad::parameter<T, S, Device>& p, index_t fan_in, index_t fan_out, random_stream& stream) {
  const double limit = std::sqrt(6.0 / double(fan_in + fan_out));
  const std::uint64_t start = stream.take(static_cast<std::uint64_t>(p.value().size()));
  std::vector<T> values(static_cast<std::size_t>(p.value().size()));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<T>((2.0 * stream.uniform(start + std::uint64_t(i)) - 1.0) * limit);
  copy_from_host<Device>(p.value().data(), std::span<const T>(values));
}

/// Normal with mean 0 and the given deviation (Box–Muller).
template <class T, class S, class Device>
void normal(grad::parameter<T, S, Device>& p, double deviation, random_stream& stream) {
  const std::uint64_t start = stream.take(2 * static_cast<std::uint64_t>(p.value().size()));
  std::vector<T> values(static_cast<std::size_t>(p.value().size()));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double u1 = 1.0 - stream.uniform(start + 2 * std::uint64_t(i));  // (0, 1]
    const double u2 = stream.uniform(start + 2 * std::uint64_t(i) + 1);
    values[i] = static_cast<T>(deviation * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  }
  copy_from_host<Device>(p.value().data(), std::span<const T>(values));
}

/// Every element set to one value.
template <class T, class S, class Device>
void constant(grad::parameter<T, S, Device>& p, T value) {
  primitives<Device>::fill(p.value().data(), p.value().size(), value);
}

}  // namespace attn::nn
