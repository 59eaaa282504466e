// A learned affine map x·W + b over the last dimension.
#pragma once

#include "../grad/linear.hpp"
#include "../grad/parameter.hpp"
#include "context.hpp"
#include "init.hpp"

namespace attn::nn {

template <class T, class In, class Out, class Device = cpu>
struct linear {
  grad::parameter<T, shape<In, Out>, Device> weight;
  grad::parameter<T, shape<Out>, Device> bias;

  explicit linear(random_stream& init) : linear(init, Out::extent) {}

  /// Xavier-uniform as if this matrix were a slice of one `fused_out` wide: the authors'
  /// tensor2tensor draws projections that share an input as one matrix (see attention.hpp).
  linear(random_stream& init, index_t fused_out) { xavier_uniform(weight, In::extent, fused_out, init); }

  template <class B, class L>
  grad::variable<T, shape<B, L, Out>, Device> operator()(const context& ctx,
                                                         const grad::variable<T, shape<B, L, In>, Device>& x) const {
    return grad::linear(ctx.tape, x, weight, bias);
  }

  /// max(0, x·W + b) in one operation (the feed-forward's first layer).
  template <class B, class L>
  grad::variable<T, shape<B, L, Out>, Device> relu(const context& ctx,
                                                   const grad::variable<T, shape<B, L, In>, Device>& x) const {
    return grad::linear_relu(ctx.tape, x, weight, bias);
  }

  void collect(grad::parameter_list<T, Device>& list) {
    list.add("weight", weight);
    list.add("bias", bias);
  }
};

}  // namespace attn::nn
