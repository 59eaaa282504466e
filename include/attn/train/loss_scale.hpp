// Dynamic loss scaling for float16 training (Micikevicius et al., 2018, §3.2; the rule of
// PyTorch's GradScaler): the loss's gradient is multiplied by a scale S before the backward
// pass, so that small activation gradients stay above float16's smallest numbers (2⁻²⁴) instead
// of flushing to 0, and the parameters' gradients (float master copies) are divided by S before
// the update. A step whose gradients overflowed float16's range (65504: an ∞ or a NaN among
// them) is skipped and S halved; after `growth_interval` finite steps in a row S doubles. S is
// a power of two, so scaling and unscaling are exact.
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>

#include "../grad/parameter.hpp"
#include "clip.hpp"

namespace attn::train {

struct loss_scale_options {
  double initial = 65536;      // 2¹⁶, PyTorch's GradScaler's
  long growth_interval = 2000;  // finite steps in a row before the scale doubles
};

/// What a checkpoint keeps of the scaler, so that a resumed run scales as the uninterrupted one.
struct loss_scale_state {
  double scale = 0;       // 0: no loss scaling
  long finite_steps = 0;  // finite steps in a row at this scale
  long overflows = 0;     // steps skipped for an overflow, over the whole run
};

/// The smallest and largest scales: beyond them a float16 gradient is all 0 or all ∞ anyway.
inline constexpr double smallest_loss_scale = 0x1p-24, largest_loss_scale = 0x1p+64;

class loss_scaler {
 public:
  /// `options.initial` is rounded to a power of two.
  explicit loss_scaler(loss_scale_options options = {}) : options_(options) {
    if (!(options.initial > 0) || !std::isfinite(options.initial) || options.growth_interval < 1)
      throw std::invalid_argument("attn::train::loss_scaler: the initial scale must be a positive number and the growth "
                                  "interval at least 1, not " + std::to_string(options.initial) + " and " +
                                  std::to_string(options.growth_interval));
    state_.scale = std::exp2(std::round(std::log2(options.initial)));
    state_.scale = std::fmin(std::fmax(state_.scale, smallest_loss_scale), largest_loss_scale);
  }

  /// The factor the loss's gradient is seeded with.
  double scale() const noexcept { return state_.scale; }
  const loss_scale_state& state() const noexcept { return state_; }
  /// A checkpoint's state; one without loss scaling (scale 0) keeps this scaler's.
  void restore(const loss_scale_state& saved) {
    if (saved.scale > 0) state_ = saved;
  }

  /// After the backward pass (and the all-reduce of data-parallel processes): divides every
  /// gradient by the scale, and clips them to a norm of max_norm when it is positive, in one
  /// pass. Returns the unscaled gradients' norm; NaN or ∞ when they overflowed, and then leaves
  /// them as they are.
  template <class T, class Device>
  double unscale(grad::parameter_list<T, Device>& parameters, double max_norm) const {
    const double norm = gradient_norm(parameters) / state_.scale;
    if (!std::isfinite(norm)) return norm;
    double factor = 1 / state_.scale;
    if (max_norm > 0 && norm > max_norm) factor *= max_norm / norm;
    scale_gradients(parameters, factor);
    return norm;
  }

  /// After a step: a skipped one (overflowed) halves the scale; growth_interval finite ones in
  /// a row double it. Returns whether the scale changed.
  bool update(bool finite) {
    const double before = state_.scale;
    if (!finite) {
      state_.scale = std::fmax(state_.scale / 2, smallest_loss_scale);
      state_.finite_steps = 0;
      ++state_.overflows;
    } else if (++state_.finite_steps >= options_.growth_interval) {
      state_.scale = std::fmin(state_.scale * 2, largest_loss_scale);
      state_.finite_steps = 0;
    }
    return state_.scale != before;
  }

  /// Whether the scale cannot fall further: an overflow there is not the scale's doing.
  bool at_smallest() const noexcept { return state_.scale <= smallest_loss_scale; }

 private:
  loss_scale_options options_;
  loss_scale_state state_;
};

}  // namespace attn::train
