// The tape: the backward steps of one forward pass, replayed in reverse by backward().
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace attn::grad {

/// Records, for each differentiable operation of a forward pass, the step that passes its
/// result's gradient on to its operands. Operations record only when given a tape; without
/// one (inference) they keep nothing, so activations are freed as soon as they are unused.
class tape {
 public:
  tape() = default;
  tape(const tape&) = delete;
  tape& operator=(const tape&) = delete;

  template <class Step>
  void record(Step&& step) {
    steps_.emplace_back(std::forward<Step>(step));
  }

  /// Runs the recorded steps, last first, then forgets them and the activations they held.
  /// The caller seeds the gradient of the result first (see attn::grad::backward).
  void replay() {
    for (auto step = steps_.rbegin(); step != steps_.rend(); ++step) (*step)();
    clear();
  }

  void clear() { steps_.clear(); }
  std::size_t size() const noexcept { return steps_.size(); }

 private:
  std::vector<std::function<void()>> steps_;
};

}  // namespace attn::grad
