// The Transformer (paper §3, Figure 1): embeddings, encoder, decoder and the pre-softmax
// projection, producing next-token logits for every target position.
#pragma once

#include <cstdint>

#include "config.hpp"
#include "decoder.hpp"
#include "embedding.hpp"
#include "encoder.hpp"
#include "masks.hpp"
#include "precision.hpp"

namespace attn::nn {

/// An encoder-decoder Transformer of configuration C (base, big, a Table 3 row, or your own)
/// with element type T (or a precision<activation, parameter>, nn/precision.hpp), over a
/// vocabulary of a size chosen at run time.
template <class T, class C, class Device = cpu>
class transformer {
 public:
  using config = C;
  using activation_type = activation_t<T>;  // what the passes compute in
  using parameter_type = parameter_t<T>;    // what the optimizer updates and checkpoints keep
  using A = activation_type;
  using P = parameter_type;
  using device_type = Device;
  using d_model = typename C::d_model;

  /// Parameters drawn from `seed`; token `pad` is padding in every batch. N, P_drop and the
  /// kind of positions are C's unless `h` says otherwise.
  explicit transformer(index_t vocab_size, std::uint64_t seed = 1, token pad = 0,
                       const hyperparameters& h = defaults<C>())
      : transformer(vocab_size, random_stream(seed), pad, h) {}

  /// The encoder's output for source ids [batch, L]: [batch, L, d_model].
  template <class L>
  grad::variable<A, shape<batch, L, d_model>, Device> encode(
      const context& ctx, const tensor<token, shape<batch, L>, Device>& source) const {
    const auto mask = padding_mask<A, L>(source, source.template extent<L>(), pad_);
    return encoder_(ctx, embeddings_.source(ctx, source), mask);
  }

  /// The decoder's output [batch, L, d_model] for target ids [batch, L] (shifted right: the
  /// first is the start symbol), given the encoder's output for `source`.
  template <class L, class M>
  grad::variable<A, shape<batch, L, d_model>, Device> decode(
      const context& ctx, const grad::variable<A, shape<batch, M, d_model>, Device>& memory,
      const tensor<token, shape<batch, M>, Device>& source,
      const tensor<token, shape<batch, L>, Device>& target) const {
    const auto causal = causal_mask<A, L>(target, pad_);
    const auto memory_mask = padding_mask<A, L>(source, target.template extent<L>(), pad_);
    return decoder_(ctx, embeddings_.target(ctx, target), memory, causal, memory_mask);
  }

  /// Logits [batch, tgt, vocab] of the next token at every target position (teacher forcing).
  grad::variable<A, shape<batch, tgt, vocab>, Device> operator()(
      const context& ctx, const tensor<token, shape<batch, src>, Device>& source,
      const tensor<token, shape<batch, tgt>, Device>& target) const {
    return embeddings_.logits(ctx, decode(ctx, encode(ctx, source), source, target));
  }

  /// Every parameter, with dotted names ("decoder.layer.0.cross_attention.query.weight").
  grad::parameter_list<P, Device> parameters() {
    grad::parameter_list<P, Device> list;
    collect(list);
    return list;
  }
  void collect(grad::parameter_list<P, Device>& list) {
    list.add_module("embeddings", embeddings_);
    list.add_module("encoder", encoder_);
    list.add_module("decoder", decoder_);
  }

  /// The parts, for incremental decoding (include/attn/decode), which runs them a position at a time.
  const embeddings<T, C, Device>& embedding_layers() const { return embeddings_; }
  const encoder<T, C, Device>& encoder_stack() const { return encoder_; }
  const decoder<T, C, Device>& decoder_stack() const { return decoder_; }

  index_t vocabulary_size() const { return embeddings_.vocabulary_size(); }
  token pad() const { return pad_; }
  const hyperparameters& hyper() const { return hyper_; }

 private:
  transformer(index_t vocab_size, random_stream init, token pad, const hyperparameters& h)
      : embeddings_(vocab_size, init, h), encoder_(init, h), decoder_(init, h), pad_(pad), hyper_(h) {}

  embeddings<T, C, Device> embeddings_;
  encoder<T, C, Device> encoder_;
  decoder<T, C, Device> decoder_;
  token pad_;
  hyperparameters hyper_;
};

}  // namespace attn::nn
