// Adam (Kingma & Ba, 2015) with the paper's constants (§5.3: β1 = 0.9, β2 = 0.98, ε = 1e-9)
// and the learning-rate schedule of equation (3).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "../cpu/threads.hpp"
#include "../grad/parameter.hpp"

namespace attn::train {

struct adam_options {
  double beta1 = 0.9;
  double beta2 = 0.98;
  double epsilon = 1e-9;
};

/// lrate = d_model^−0.5 · min(step^−0.5, step · warmup^−1.5), step counted from 1 (eq. (3)).
inline double noam_rate(index_t d_model, long step, long warmup = 4000) {
  const double s = double(std::max(step, 1L));
  return std::pow(double(d_model), -0.5) * std::min(std::pow(s, -0.5), s * std::pow(double(warmup), -1.5));
}

/// Adam over a parameter list; keeps the first and second moments of each parameter.
template <class T>
class adam {
 public:
  explicit adam(grad::parameter_list<T>& parameters, adam_options options = {})
      : parameters_(&parameters), options_(options) {
    for (const auto& p : parameters) {
      first_.emplace_back(static_cast<std::size_t>(p.size), T{0});
      second_.emplace_back(static_cast<std::size_t>(p.size), T{0});
    }
  }

  /// One update with learning rate `rate` from the gradients in the parameters.
  void step(double rate) {
    ++steps_;
    const double b1 = options_.beta1, b2 = options_.beta2;
    const double correction1 = 1.0 - std::pow(b1, double(steps_));
    const double correction2 = 1.0 - std::pow(b2, double(steps_));
    const T step_size = T(rate / correction1);
    const T root_correction2 = T(1.0 / std::sqrt(correction2));
    const T epsilon = T(options_.epsilon);
    auto& refs = parameters_->refs();
    for (std::size_t i = 0; i < refs.size(); ++i) {
      T* value = refs[i].value;
      const T* grad = refs[i].grad;
      T* m = first_[i].data();
      T* v = second_[i].data();
      cpu_backend::parallel_for(refs[i].size, 16, 1 << 14, [&](index_t begin, index_t end) {
        for (index_t j = begin; j < end; ++j) {
          const T g = grad[j];
          m[j] = T(b1) * m[j] + T(1 - b1) * g;
          v[j] = T(b2) * v[j] + T(1 - b2) * g * g;
          value[j] -= step_size * m[j] / (std::sqrt(v[j]) * root_correction2 + epsilon);
        }
      });
    }
  }

  long steps() const noexcept { return steps_; }
  const std::vector<std::vector<T>>& first_moments() const noexcept { return first_; }
  const std::vector<std::vector<T>>& second_moments() const noexcept { return second_; }

  /// For restoring a checkpoint: the moments are written in place, then the step count set.
  std::vector<std::vector<T>>& first_moments() noexcept { return first_; }
  std::vector<std::vector<T>>& second_moments() noexcept { return second_; }
  void set_steps(long steps) noexcept { steps_ = steps; }

 private:
  grad::parameter_list<T>* parameters_;
  adam_options options_;
  std::vector<std::vector<T>> first_, second_;
  long steps_ = 0;
};

}  // namespace attn::train
