// What a forward pass needs besides its inputs: a tape when gradients are wanted, a random
// stream when dropout is on (training).
#pragma once

#include "../core/random.hpp"
#include "../grad/dropout.hpp"
#include "../grad/tape.hpp"

namespace attn::nn {

struct context {
  grad::tape* tape = nullptr;        // record for backward(); null for inference
  random_stream* dropout = nullptr;  // dropout's numbers; null turns dropout off
};

/// Inference: no tape, no dropout; activations are freed as soon as they are used.
inline context inference() { return {}; }

/// Dropout with probability p when the context carries a random stream (training).
template <class T, class S>
grad::variable<T, S> dropout(const context& ctx, const grad::variable<T, S>& x, double p) {
  return ctx.dropout != nullptr ? grad::dropout(ctx.tape, x, p, *ctx.dropout) : x;
}

}  // namespace attn::nn
