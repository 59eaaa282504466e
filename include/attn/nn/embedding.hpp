// Embeddings and positions (paper §3.4, §3.5): token embeddings multiplied by √d_model, the
// same matrix as the pre-softmax projection, plus sinusoidal or learned position encodings.
#pragma once

#include <cmath>
#include <optional>

#include "../core/transfer.hpp"
#include "../grad/cast.hpp"
#include "../grad/elementwise.hpp"
#include "../grad/embedding.hpp"
#include "../grad/linear.hpp"
#include "config.hpp"
#include "context.hpp"
#include "dims.hpp"
#include "init.hpp"
#include "precision.hpp"

namespace attn::nn {

/// PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)),
/// for positions 0 … rows − 1 (§3.5).
template <class T, class D, class Rows = positions>
tensor<T, shape<Rows, D>> sinusoids(index_t rows) {
  const index_t width = D::extent;
  tensor<T, shape<Rows, D>> table(rows);
  for (index_t pos = 0; pos < rows; ++pos) {
    for (index_t i = 0; i < width; ++i) {
      const double angle = double(pos) / std::pow(10000.0, double(i - i % 2) / double(width));
      table(pos, i) = static_cast<T>(i % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  return table;
}

/// Token tables and position encodings of both sides of the model.
template <class T, class C, class Device = cpu>
class embeddings {
 public:
  using A = activation_t<T>;
  using P = parameter_t<T>;
  using d_model = typename C::d_model;
  using table_type = grad::parameter<P, shape<vocab, d_model>, Device>;
  using positions_type = grad::parameter<P, shape<positions, d_model>, Device>;
  embeddings(index_t vocab_size, random_stream& init, const hyperparameters& h)
      : learned_(h.positions == positional::learned),
        no_positions_(h.positions == positional::none),
        dropout_(h.dropout),
        source_(extents<shape<vocab, d_model>>(vocab_size)),
        target_(C::tied_embeddings ? source_ : table_type(extents<shape<vocab, d_model>>(vocab_size))),
        output_(C::tied_embeddings ? source_ : table_type(extents<shape<vocab, d_model>>(vocab_size))),
        sinusoids_(to_device<Device>(sinusoids<A, d_model>(C::max_positions))),
        source_positions_(extents<shape<positions, d_model>>(learned_ ? C::max_positions : 0)),
        target_positions_(extents<shape<positions, d_model>>(learned_ ? C::max_positions : 0)) {
    // Deviation d_model^-1/2, so that the embeddings times √d_model have unit scale (tensor2tensor).
    const double deviation = 1.0 / std::sqrt(double(d_model::extent));
    normal(source_, deviation, init);
    if constexpr (!C::tied_embeddings) {
      normal(target_, deviation, init);
      normal(output_, deviation, init);
    }
    if (learned_) {
      normal(source_positions_, deviation, init);
      normal(target_positions_, deviation, init);
    }
  }

  /// Token embeddings · √d_model + positions, with dropout (§5.4): [batch, L, d_model].
  template <class L>
  grad::variable<A, shape<batch, L, d_model>, Device> source(const context& ctx,
                                                             const tensor<token, shape<batch, L>, Device>& ids) const {
    return embed(ctx, source_, source_positions_, ids);
  }
  /// `first` is the position of ids' first column: incremental decoding embeds one position
  /// at a time.
  template <class L>
  grad::variable<A, shape<batch, L, d_model>, Device> target(const context& ctx,
                                                             const tensor<token, shape<batch, L>, Device>& ids,
                                                             index_t first = 0) const {
    return embed(ctx, target_, target_positions_, ids, first);
  }

  /// The pre-softmax projection: x · Eᵀ, logits over the vocabulary.
  template <class L>
  grad::variable<A, shape<batch, L, vocab>, Device> logits(
      const context& ctx, const grad::variable<A, shape<batch, L, d_model>, Device>& x) const {
    return grad::project_rows(ctx.tape, x, grad::cast<A>(ctx.tape, output_));
  }

  index_t vocabulary_size() const { return source_.extents().template extent<vocab>(); }
  /// E of the pre-softmax projection x · Eᵀ (the source table when embeddings are tied).
  const table_type& output_table() const { return output_; }

  void collect(grad::parameter_list<P, Device>& list) {
    if constexpr (C::tied_embeddings) {
      list.add("shared", source_);
    } else {
      list.add("source", source_);
      list.add("target", target_);
      list.add("output", output_);
    }
    if (learned_) {
      list.add("source_positions", source_positions_);
      list.add("target_positions", target_positions_);
    }
  }

 private:
  template <class L>
  grad::variable<A, shape<batch, L, d_model>, Device> embed(const context& ctx, const table_type& table,
                                                            const positions_type& learned,
                                                            const tensor<token, shape<batch, L>, Device>& ids,
                                                            index_t first = 0) const {
    const index_t length = ids.template extent<L>();
    auto tokens = grad::lookup(ctx.tape, grad::cast<A>(ctx.tape, table), ids,
                               accumulate_t<A>(std::sqrt(double(d_model::extent))));
    if (no_positions_) return dropout(ctx, tokens, dropout_);
    grad::variable<A, shape<L, d_model>, Device> where = [&] {
      if (learned_) {
        return grad::table_rows<L>(ctx.tape, grad::cast<A>(ctx.tape, learned), first, length);
      } else {
        if (first + length > sinusoids_.template extent<positions>())
          sinusoids_ = to_device<Device>(sinusoids<A, d_model>(2 * (first + length)));
        return grad::variable<A, shape<L, d_model>, Device>(tensor_view<const A, shape<L, d_model>, Device>(
            sinusoids_.data() + first * d_model::extent, extents<shape<L, d_model>>(length)));
      }
    }();
    return dropout(ctx, grad::add_broadcast<batch>(ctx.tape, tokens, where), dropout_);
  }

  bool learned_;    // learned positions (row E) instead of sinusoids
  bool no_positions_;  // neither: attention's variant knows positions (ALiBi)
  double dropout_;  // P_drop
  table_type source_, target_, output_;
  mutable tensor<A, shape<positions, d_model>, Device> sinusoids_;  // grown when a longer sentence comes
  positions_type source_positions_, target_positions_;
};

}  // namespace attn::nn
