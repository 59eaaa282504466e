// The training loss (paper §5.4): cross-entropy against label-smoothed targets, averaged over
// the target tokens that are not padding.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../core/primitives.hpp"
#include "../core/transfer.hpp"
#include "../grad/variable.hpp"

namespace attn::train {

template <class T, class Device = cpu>
struct loss_result {
  grad::variable<T, shape<>, Device> loss;  // mean smoothed cross-entropy per real token: what is minimised
  double nll = 0;                           // Σ −log p(target) over real tokens: perplexity = exp(nll / tokens)
  double smoothed = 0;                      // Σ of the smoothed cross-entropy over real tokens
  index_t tokens = 0;                       // target tokens that are not padding
};

/// Cross-entropy of softmax(logits) against q = (1 − ε)·onehot(target) + ε/V over the V
/// classes (label smoothing, Szegedy et al. 2016, as in PyTorch's `label_smoothing`).
/// Positions whose target is `pad` count for nothing. Returns their mean over real tokens.
/// The device's fused primitive writes the [tokens, V] probabilities once; the backward pass
/// turns them into the gradient (in place, unless the logits are 16-bit: the probabilities, the
/// loss and its gradient are computed in accumulate_t, float, and the gradient rounded once).
template <class T, class B, class L, class V, class Id, class Device>
loss_result<accumulate_t<T>, Device> cross_entropy(grad::tape* t,
                                                   const grad::variable<T, shape<B, L, V>, Device>& logits,
                                                   const tensor<Id, shape<B, L>, Device>& targets, double smoothing,
                                                   Id pad) {
  using A = accumulate_t<T>;
  const auto& x = logits.value();
  check_common_extents("attn::train::cross_entropy", x.extents(), targets.extents());
  const index_t classes = x.template extent<V>();
  tensor<A, shape<B, L, V>, Device> probabilities(x.extents(), uninitialized);
  tensor<A, shape<B, L>, Device> weight(targets.extents(), uninitialized);  // 1 for real tokens, 0 for padding
  const cross_entropy_totals totals = primitives<Device>::cross_entropy(
      x.data(), targets.data(), targets.size(), classes, smoothing, pad, probabilities.data(), weight.data());

  loss_result<A, Device> result{
      grad::variable<A, shape<>, Device>(tensor<A, shape<>, Device>(), grad::recording(t, logits)), totals.nll,
      totals.smoothed, totals.tokens};
  const A mean = totals.tokens > 0 ? A(totals.smoothed / double(totals.tokens)) : A{0};
  primitives<Device>::fill(result.loss.value().data(), 1, mean);
  if (result.loss.requires_grad()) {
    t->record([logits = logits.without_value(), loss = result.loss, weight = std::move(weight),
               probabilities = std::move(probabilities),
               targets = tensor<Id, shape<B, L>, Device>(targets), smoothing, classes,
               tokens = totals.tokens]() mutable {
      if (!loss.has_grad() || tokens == 0) return;
      // d/dx = (softmax(x) − q) · weight · dloss / tokens.
      const A dloss = to_host(loss.grad()).data()[0];
      if constexpr (std::is_same_v<T, A>) {  // written over the probabilities
        primitives<Device>::cross_entropy_backward(probabilities.data(), probabilities.data(), targets.data(),
                                                   weight.data(), targets.size(), classes, smoothing,
                                                   dloss / A(tokens));
        logits.accumulate(std::move(probabilities));
      } else {
        tensor<T, shape<B, L, V>, Device> gradient(probabilities.extents(), uninitialized);
        primitives<Device>::cross_entropy_backward(gradient.data(), probabilities.data(), targets.data(),
                                                   weight.data(), targets.size(), classes, smoothing,
                                                   dloss / A(tokens));
        logits.accumulate(std::move(gradient));
      }
    });
  }
  return result;
}

}  // namespace attn::train
