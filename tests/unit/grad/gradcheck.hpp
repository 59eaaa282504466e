// Finite-difference gradient checks: the tape's gradients against central differences of
// the loss, in double precision.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <attn/grad.hpp>

#include "../reference.hpp"

namespace attn::test {

/// L = Σ y ⊙ r: a scalar whose gradient with respect to y is the fixed random tensor r.
template <class T, class S>
grad::variable<T, shape<>> weighted_sum(grad::tape* t, const grad::variable<T, S>& y, const tensor<T, S>& r) {
  double total = 0;
  for (index_t i = 0; i < r.size(); ++i) total += double(y.value().data()[i]) * double(r.data()[i]);
  grad::variable<T, shape<>> loss(tensor<T, shape<>>(), grad::recording(t, y));
  loss.value().data()[0] = T(total);
  if (loss.requires_grad()) {
    t->record([y, loss, r = tensor<T, S>(r)] {
      if (loss.has_grad()) y.accumulate(r * loss.grad().data()[0]);
    });
  }
  return loss;
}

/// A variable with random values in [−1, 1] that wants a gradient: an input under check.
template <class S, class... Sizes>
grad::variable<double, S> random_input(Sizes... sizes) {
  tensor<double, S> t(sizes...);
  fill_random(t);
  return grad::variable<double, S>(std::move(t), true);
}

/// A random tensor shaped like v, for weighted_sum.
template <class T, class S>
tensor<T, S> random_like(const grad::variable<T, S>& v) {
  tensor<T, S> r(v.extents());
  fill_random(r);
  return r;
}

/// Something whose gradient is checked: its values, and where its gradient will be.
struct gradient_target {
  std::string name;
  double* value;
  index_t size;
  std::function<const double*()> grad;
  std::function<void()> reset;
};

template <class S>
gradient_target target(std::string name, const grad::variable<double, S>& v) {
  grad::variable<double, S> held = v;
  return {std::move(name), held.value().data(), held.value().size(),
          [held] { return held.has_grad() ? held.grad().data() : nullptr; }, [held] { held.clear_grad(); }};
}

/// Every parameter of a module.
inline std::vector<gradient_target> targets(grad::parameter_list<double>& list) {
  std::vector<gradient_target> out;
  for (auto& p : list) {
    auto ref = p;
    out.push_back({ref.name, ref.value, ref.size, [ref] { return static_cast<const double*>(ref.grad); },
                   [ref] { std::fill(ref.grad, ref.grad + ref.size, 0.0); }});
  }
  return out;
}

struct gradient_report {
  double worst = 0;        // largest |analytic − numeric| / max(1, |numeric|)
  std::string where;       // "name[index]" of the worst element
  index_t checked = 0;     // elements compared
};

/// Compares the tape's gradient of loss_of(&tape) with central differences of loss_of(nullptr)
/// for up to `per_target` elements of every target (all of them when fewer).
template <class LossOf>
gradient_report check_gradients(LossOf&& loss_of, const std::vector<gradient_target>& targets,
                                index_t per_target = 48, double step = 1e-5) {
  for (const auto& t : targets) t.reset();
  grad::tape tape;
  auto loss = loss_of(&tape);
  grad::backward(tape, loss);
  gradient_report report;
  for (const auto& t : targets) {
    const double* analytic_data = t.grad();
    const std::vector<double> analytic =
        analytic_data ? std::vector<double>(analytic_data, analytic_data + t.size) : std::vector<double>(std::size_t(t.size), 0.0);
    const index_t stride = std::max<index_t>(1, t.size / per_target);
    for (index_t i = 0; i < t.size; i += stride) {
      const double saved = t.value[i];
      t.value[i] = saved + step;
      const double up = loss_of(nullptr).value().data()[0];
      t.value[i] = saved - step;
      const double down = loss_of(nullptr).value().data()[0];
      t.value[i] = saved;
      const double numeric = (up - down) / (2 * step);
      const double error = std::fabs(analytic[std::size_t(i)] - numeric) / std::max(1.0, std::fabs(numeric));
      ++report.checked;
      if (error > report.worst || std::isnan(error)) {
        report.worst = std::isnan(error) ? INFINITY : error;
        report.where = t.name + "[" + std::to_string(i) + "]";
      }
    }
  }
  return report;
}

}  // namespace attn::test
