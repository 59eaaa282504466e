// What a forward pass needs besides its inputs: a tape when gradients are wanted, a random
// stream when dropout is on (training), a record when attention weights are to be kept.
#pragma once

#include <string_view>
#include <vector>

#include "../core/random.hpp"
#include "../core/tensor.hpp"
#include "../core/transfer.hpp"
#include "../grad/dropout.hpp"
#include "../grad/tape.hpp"

namespace attn::nn {

/// Which of the model's three attentions (paper §3.2.3) produced some weights.
enum class attention_kind { encoder_self, decoder_self, encoder_decoder };

inline std::string_view to_string(attention_kind kind) {
  switch (kind) {
    case attention_kind::encoder_self:
      return "encoder-self";
    case attention_kind::decoder_self:
      return "decoder-self";
    case attention_kind::encoder_decoder:
      return "encoder-decoder";
  }
  return "?";
}

/// The attention weights of a forward pass, in the order the layers ran: for pictures of what
/// each head looks at (the paper's appendix figures). Weights are [batch, heads, queries, keys].
struct attention_record {
  struct weights {
    attention_kind kind;
    index_t sentences, heads, queries, keys;
    std::vector<float> values;  // row-major [sentences, heads, queries, keys]
    float at(index_t sentence, index_t head, index_t query, index_t key) const {
      return values[std::size_t(((sentence * heads + head) * queries + query) * keys + key)];
    }
  };
  std::vector<weights> maps;

  template <class T, class B, class H, class Q, class K, class Device>
  void add(attention_kind kind, const tensor<T, shape<B, H, Q, K>, Device>& on_device) {
    const auto w = to_host(on_device);
    const auto& e = w.extents();
    weights& m = maps.emplace_back(weights{
        kind, e.template extent<B>(), e.template extent<H>(), e.template extent<Q>(), e.template extent<K>(), {}});
    m.values.assign(w.data(), w.data() + w.size());
  }
  /// The maps of one kind, in layer order.
  std::vector<const weights*> of(attention_kind kind) const {
    std::vector<const weights*> found;
    for (const auto& m : maps)
      if (m.kind == kind) found.push_back(&m);
    return found;
  }
};

/// How attention is computed: by the device's fused kernel where the variant allows it and the
/// keys are many enough for it to pay, by products and a softmax elsewhere (automatic), or
/// always one way (fused throws where it cannot be: a variant that scores in a way of its own,
/// recorded weights). A variant's score modification runs inside the fused kernel.
enum class attention_path { automatic, fused, unfused };

struct context {
  grad::tape* tape = nullptr;             // record for backward(); null for inference
  random_stream* dropout = nullptr;       // dropout's numbers; null turns dropout off
  attention_record* attention = nullptr;  // keeps every attention's weights when set
  attention_path path = attention_path::automatic;
  bool deterministic = false;  // the same bits every run: fused attention's backward without atomics
};

/// Inference: no tape, no dropout; activations are freed as soon as they are used.
inline context inference() {
  return {};
}

/// Dropout with probability p when the context carries a random stream (training).
template <class T, class S, class Device>
grad::variable<T, S, Device> dropout(const context& ctx, const grad::variable<T, S, Device>& x, double p) {
  return ctx.dropout != nullptr ? grad::dropout(ctx.tape, x, p, *ctx.dropout) : x;
}

/// x + dropout(y, p): the dropout only when the context carries a random stream (training).
template <class T, class S, class Device>
grad::variable<T, S, Device> add_dropout(const context& ctx, const grad::variable<T, S, Device>& x,
                                         const grad::variable<T, S, Device>& y, double p) {
  return ctx.dropout != nullptr ? grad::add_dropout(ctx.tape, x, y, p, *ctx.dropout) : grad::add(ctx.tape, x, y);
}

}  // namespace attn::nn
