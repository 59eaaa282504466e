// The training loss (paper §5.4): cross-entropy against label-smoothed targets, averaged over
// the target tokens that are not padding.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "../cpu/rows.hpp"
#include "../expr/broadcast.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"
#include "../grad/variable.hpp"

namespace attn::train {

template <class T>
struct loss_result {
  grad::variable<T, shape<>> loss;  // mean smoothed cross-entropy per real token: what is minimised
  double nll = 0;                   // Σ −log p(target) over real tokens: perplexity = exp(nll / tokens)
  double smoothed = 0;              // Σ of the smoothed cross-entropy over real tokens
  index_t tokens = 0;               // target tokens that are not padding
};

/// Cross-entropy of softmax(logits) against q = (1 − ε)·onehot(target) + ε/V over the V
/// classes (label smoothing, Szegedy et al. 2016, as in PyTorch's `label_smoothing`).
/// Positions whose target is `pad` count for nothing. Returns their mean over real tokens.
template <class T, class B, class L, class V, class Id>
loss_result<T> cross_entropy(grad::tape* t, const grad::variable<T, shape<B, L, V>>& logits,
                             const tensor<Id, shape<B, L>>& targets, double smoothing, Id pad) {
  const auto& x = logits.value();
  check_common_extents("attn::train::cross_entropy", x.extents(), targets.extents());
  const index_t classes = x.template extent<V>();
  // log Σ exp over the classes, stable: max + log Σ exp(x − max). The exponentials are kept:
  // divided by their sum they are the softmax the gradient needs.
  const auto row_max = eval(max<V>(x));
  tensor<T, shape<B, L, V>> exps(exp(x - broadcast_like(row_max, x)));
  auto row_sum = eval(sum<V>(exps));
  const auto log_sum = eval(log(row_sum) + row_max);
  const auto row_total = eval(sum<V>(x));

  loss_result<T> result{grad::variable<T, shape<>>(tensor<T, shape<>>(), grad::recording(t, logits))};
  tensor<T, shape<B, L>> weight(targets.extents(), uninitialized);  // 1 for real tokens, 0 for padding
  const Id* target = targets.data();
  for (index_t r = 0; r < targets.size(); ++r) {
    if (target[r] == pad) {
      weight.data()[r] = T{0};
      continue;
    }
    if (target[r] < 0 || target[r] >= classes)
      throw extent_error("attn::train::cross_entropy", V::name,
                         "has extent " + std::to_string(classes) + ", but target id " +
                             std::to_string(target[r]) + " was given at position " + std::to_string(r));
    weight.data()[r] = T{1};
    const double lse = log_sum.data()[r];
    const double log_p_target = double(x.data()[r * classes + target[r]]) - lse;
    const double mean_log_p = double(row_total.data()[r]) / double(classes) - lse;
    result.nll -= log_p_target;
    result.smoothed -= (1.0 - smoothing) * log_p_target + smoothing * mean_log_p;
    ++result.tokens;
  }
  result.loss.value().data()[0] = result.tokens > 0 ? T(result.smoothed / double(result.tokens)) : T{0};

  if (result.loss.requires_grad()) {
    t->record([logits, loss = result.loss, weight = std::move(weight), exps = std::move(exps),
               row_sum = std::move(row_sum), targets = tensor<Id, shape<B, L>>(targets), smoothing, classes,
               tokens = result.tokens]() mutable {
      if (!loss.has_grad() || tokens == 0) return;
      // d/dx = (softmax(x) − q) · weight · dloss / tokens, written over the kept exponentials.
      const T scale = loss.grad().data()[0] / T(tokens);
      const auto row_scale = eval(weight * scale);
      const auto inverse_sum = eval(row_scale / row_sum);
      auto& dx = exps;
      dx = dx * broadcast_like(inverse_sum, dx) - broadcast_like(row_scale, dx) * T(smoothing / double(classes));
      for (index_t r = 0; r < targets.size(); ++r)
        if (weight.data()[r] != T{0}) dx.data()[r * classes + targets.data()[r]] -= T(1.0 - smoothing) * row_scale.data()[r];
      logits.accumulate(std::move(dx));
    });
  }
  return result;
}

}  // namespace attn::train
