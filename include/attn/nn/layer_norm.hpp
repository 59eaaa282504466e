// Layer normalisation with a learned gain (1 at first) and bias (0 at first).
#pragma once

#include "../grad/layer_norm.hpp"
#include "../grad/parameter.hpp"
#include "context.hpp"
#include "init.hpp"

namespace attn::nn {

template <class T, class D, class Device = cpu>
struct layer_norm {
  grad::parameter<T, shape<D>, Device> gain;
  grad::parameter<T, shape<D>, Device> bias;
  T epsilon;

  explicit layer_norm(double epsilon_ = 1e-6) : epsilon(T(epsilon_)) { constant(gain, T{1}); }

  template <class B, class L>
  grad::variable<T, shape<B, L, D>, Device> operator()(const context& ctx,
                                                       const grad::variable<T, shape<B, L, D>, Device>& x) const {
    return grad::layer_norm(ctx.tape, x, gain, bias, epsilon);
  }

  void collect(grad::parameter_list<T, Device>& list) {
    list.add("gain", gain);
    list.add("bias", bias);
  }
};

}  // namespace attn::nn
