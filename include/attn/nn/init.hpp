// Parameter initialisation from a seeded stream, so that a seed fixes the initial model.
#pragma once

#include <cmath>
#include <numbers>

#include "../core/random.hpp"
#include "../grad/parameter.hpp"

namespace attn::nn {

/// Uniform in [−a, a] with a = √(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010): the authors'
/// tensor2tensor code draws every matrix so ("uniform_unit_scaling": variance scaling over
/// fan_avg, gain 1), fused ones as a whole (see multi_head_attention::fused_width).
template <class T, class S>
void xavier_uniform(grad::parameter<T, S>& p, index_t fan_in, index_t fan_out, random_stream& stream) {
  const double limit = std::sqrt(6.0 / double(fan_in + fan_out));
  const std::uint64_t start = stream.take(static_cast<std::uint64_t>(p.value().size()));
  for (index_t i = 0; i < p.value().size(); ++i)
    p.value().data()[i] = static_cast<T>((2.0 * stream.uniform(start + std::uint64_t(i)) - 1.0) * limit);
}

/// Normal with mean 0 and the given deviation (Box–Muller).
template <class T, class S>
void normal(grad::parameter<T, S>& p, double deviation, random_stream& stream) {
  const std::uint64_t start = stream.take(2 * static_cast<std::uint64_t>(p.value().size()));
  for (index_t i = 0; i < p.value().size(); ++i) {
    const double u1 = 1.0 - stream.uniform(start + 2 * std::uint64_t(i));  // (0, 1]
    const double u2 = stream.uniform(start + 2 * std::uint64_t(i) + 1);
    p.value().data()[i] =
        static_cast<T>(deviation * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  }
}

/// Every element set to one value.
template <class T, class S>
void constant(grad::parameter<T, S>& p, T value) {
  std::fill(p.value().data(), p.value().data() + p.value().size(), value);
}

}  // namespace attn::nn
