// Adam (Kingma & Ba, 2015) with the paper's constants (§5.3: β1 = 0.9, β2 = 0.98, ε = 1e-9)
// and the learning-rate schedule of equation (3).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "../core/primitives.hpp"
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

/// The flat elements of one parameter's moment.
using moment_elements = dim<"moment_elements">;

/// Adam over a parameter list; keeps the first and second moments of each parameter on the
/// parameters' device. A step is one call of the device's adam_step (one launch on a GPU).
template <class T, class Device = cpu>
class adam {
 public:
  using moment = tensor<T, shape<moment_elements>, Device>;

  explicit adam(grad::parameter_list<T, Device>& parameters, adam_options options = {})
      : parameters_(&parameters), options_(options) {
    for (const auto& p : parameters) {
      first_.emplace_back(extents<shape<moment_elements>>(p.size));  // zero-filled
      second_.emplace_back(extents<shape<moment_elements>>(p.size));
    }
  }

  /// One update with learning rate `rate` from the gradients in the parameters.
  void step(double rate) {
    ++steps_;
    const double correction1 = 1.0 - std::pow(options_.beta1, double(steps_));
    const double correction2 = 1.0 - std::pow(options_.beta2, double(steps_));
    const adam_coefficients c{options_.beta1, options_.beta2, options_.epsilon, rate / correction1,
                              1.0 / std::sqrt(correction2)};
    auto& refs = parameters_->refs();
    tensors_.clear();
    for (std::size_t i = 0; i < refs.size(); ++i)
      tensors_.push_back({refs[i].value, refs[i].grad, first_[i].data(), second_[i].data(), refs[i].size});
    primitives<Device>::adam_step(std::span<const adam_tensor<T>>(tensors_), c);
  }

  long steps() const noexcept { return steps_; }
  const std::vector<moment>& first_moments() const noexcept { return first_; }
  const std::vector<moment>& second_moments() const noexcept { return second_; }
  /// For restoring a checkpoint: the moments are written in place, then the step count set.
  std::vector<moment>& first_moments() noexcept { return first_; }
  std::vector<moment>& second_moments() noexcept { return second_; }
  void set_steps(long steps) noexcept { steps_ = steps; }

 private:
  grad::parameter_list<T, Device>* parameters_;
  adam_options options_;
  std::vector<moment> first_, second_;
  std::vector<adam_tensor<T>> tensors_;  // kept: no allocation a step
  long steps_ = 0;
};

}  // namespace attn::train
