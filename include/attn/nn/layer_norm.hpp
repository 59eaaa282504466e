// Layer normalisation with a learned gain (1 at first) and bias (0 at first).
#pragma once

#include "../grad/cast.hpp"
#include "../grad/layer_norm.hpp"
#include "../grad/parameter.hpp"
#include "context.hpp"
#include "init.hpp"
#include "precision.hpp"

namespace attn::nn {

/// T is an element type or a precision (nn/precision.hpp).
template <class T, class D, class Device = cpu>
struct layer_norm {
  using A = activation_t<T>;
  using P = parameter_t<T>;

  grad::parameter<P, shape<D>, Device> gain;
  grad::parameter<P, shape<D>, Device> bias;
  accumulate_t<A> epsilon;  // float for 16-bit activations, as the rows' statistics

  explicit layer_norm(double epsilon_ = 1e-6) : epsilon(accumulate_t<A>(epsilon_)) { constant(gain, P{1}); }

  template <class B, class L>
  grad::variable<A, shape<B, L, D>, Device> operator()(const context& ctx,
                                                       const grad::variable<A, shape<B, L, D>, Device>& x) const {
    return grad::layer_norm(ctx.tape, x, grad::cast<A>(ctx.tape, gain), grad::cast<A>(ctx.tape, bias), epsilon);
  }

  void collect(grad::parameter_list<P, Device>& list) {
    list.add("gain", gain);
    list.add("bias", bias);
  }
};

}  // namespace attn::nn
