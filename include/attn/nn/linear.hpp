// A learned affine map x·W + b over the last dimension.
#pragma once

#include "../grad/cast.hpp"
#include "../grad/linear.hpp"
#include "../grad/parameter.hpp"
#include "context.hpp"
#include "init.hpp"
#include "precision.hpp"

namespace attn::nn {

/// T is an element type or a precision (nn/precision.hpp): W and b are kept as its parameter
/// type and read as its activation type.
template <class T, class In, class Out, class Device = cpu>
struct linear {
  using A = activation_t<T>;
  using P = parameter_t<T>;

  grad::parameter<P, shape<In, Out>, Device> weight;
  grad::parameter<P, shape<Out>, Device> bias;

  explicit linear(random_stream& init) : linear(init, Out::extent) {}

  /// Xavier-uniform as if this matrix were a slice of one `fused_out` wide: the authors'
  /// tensor2tensor draws projections that share an input as one matrix (see attention.hpp).
  linear(random_stream& init, index_t fused_out) { xavier_uniform(weight, In::extent, fused_out, init); }

  template <class B, class L>
  grad::variable<A, shape<B, L, Out>, Device> operator()(const context& ctx,
                                                         const grad::variable<A, shape<B, L, In>, Device>& x) const {
    return grad::linear(ctx.tape, x, grad::cast<A>(ctx.tape, weight), grad::cast<A>(ctx.tape, bias));
  }

  /// max(0, x·W + b) in one operation (the feed-forward's first layer).
  template <class B, class L>
  grad::variable<A, shape<B, L, Out>, Device> relu(const context& ctx,
                                                   const grad::variable<A, shape<B, L, In>, Device>& x) const {
    return grad::linear_relu(ctx.tape, x, grad::cast<A>(ctx.tape, weight), grad::cast<A>(ctx.tape, bias));
  }

  void collect(grad::parameter_list<P, Device>& list) {
    list.add("weight", weight);
    list.add("bias", bias);
  }
};

}  // namespace attn::nn
