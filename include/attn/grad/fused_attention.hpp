// Differentiable fused attention: eq. (1), softmax(scale · Q·Kᵀ + masks) · V, by the device's
// tiled kernel (core/fused_attention.hpp), which keeps the rows' log-sum-exp instead of the
// [queries, keys] weights; the backward recomputes them a tile at a time.
#pragma once

#include <memory>
#include <string>
#include <type_traits>

#include "../core/fused_attention.hpp"
#include "variable.hpp"

namespace attn::grad {

/// Which keys a query sees, without a [batch, queries, keys] tensor: the first key_lengths[b]
/// keys of sentence b (null: all), none after the query's position when causal, and those the
/// kernel's rule allows. Query i sits at position first_query + i.
template <class Batch, class Device>
struct key_visibility {
  const tensor<index_t, shape<Batch>, Device>* key_lengths = nullptr;
  bool causal = false;
  index_t first_query = 0;
};

/// softmax over the visible keys of scale · q·kᵀ (+ bias, an additive mask [B, Q, K] shared by
/// the heads), times v: q [B, H, Q, DK], k [B, G, K, DK], v [B, G, K, DV] with G key/value heads
/// shared by H / G query heads each. Returns [B, H, Q, DV].
template <class T, class B, class H, class Q, class G, class K, class DK, class DV, class Device,
          class Rule = every_pair>
variable<T, shape<B, H, Q, DV>, Device> fused_attention(tape* t, const variable<T, shape<B, H, Q, DK>, Device>& q,
                                                        const variable<T, shape<B, G, K, DK>, Device>& k,
                                                        const variable<T, shape<B, G, K, DV>, Device>& v,
                                                        const key_visibility<B, Device>& visible, T scale,
                                                        std::type_identity_t<const tensor<T, shape<B, Q, K>, Device>*> bias = nullptr,
                                                        Rule rule = {}) {
  static_assert(!H::is_static || !G::is_static || H::extent % G::extent == 0,
                "attn::grad::fused_attention: the query heads must be a multiple of the key/value heads");
  check_common_extents("attn::grad::fused_attention", q.extents(), k.extents());
  check_common_extents("attn::grad::fused_attention", k.extents(), v.extents());
  if (visible.key_lengths) check_common_extents("attn::grad::fused_attention", visible.key_lengths->extents(), q.extents());
  if (bias) {
    check_common_extents("attn::grad::fused_attention", bias->extents(), q.extents());
    check_common_extents("attn::grad::fused_attention", bias->extents(), k.extents());
  }
  fused_attention_problem p;
  p.batch = q.extents().template extent<B>();
  p.heads = q.extents().template extent<H>();
  p.kv_heads = k.extents().template extent<G>();
  p.queries = q.extents().template extent<Q>();
  p.keys = k.extents().template extent<K>();
  p.d_k = q.extents().template extent<DK>();
  p.d_v = v.extents().template extent<DV>();
  p.scale = double(scale);
  p.key_lengths = visible.key_lengths ? visible.key_lengths->data() : nullptr;
  p.causal = visible.causal;
  p.first_query = visible.first_query;
  if (p.kv_heads == 0 || p.heads % p.kv_heads != 0)
    throw extent_error("attn::grad::fused_attention", "heads",
                       std::to_string(p.heads) + " query heads cannot share " + std::to_string(p.kv_heads) +
                           " key/value heads");

  using out_shape = shape<B, H, Q, DV>;
  variable<T, out_shape, Device> out(
      tensor<T, out_shape, Device>(gather_extents<out_shape>(q.extents(), v.extents()), uninitialized),
      recording(t, q, k, v));
  using row_shape = shape<B, H, Q>;
  tensor<T, row_shape, Device> log_sum_exp(gather_extents<row_shape>(q.extents()), uninitialized);
  attn::fused_attention<Device>::forward(p, q.value().data(), k.value().data(), v.value().data(),
                                         bias ? bias->data() : nullptr, out.value().data(), log_sum_exp.data(), rule);
  if (out.requires_grad()) {
    t->record([q, k, v, out, p, rule, lse = std::make_shared<tensor<T, row_shape, Device>>(std::move(log_sum_exp)),
               lengths = visible.key_lengths ? std::make_shared<tensor<index_t, shape<B>, Device>>(*visible.key_lengths)
                                             : nullptr,
               bias_copy = bias ? std::make_shared<tensor<T, shape<B, Q, K>, Device>>(*bias) : nullptr]() mutable {
      if (!out.has_grad()) return;
      p.key_lengths = lengths ? lengths->data() : nullptr;  // the tape's own copy: the caller's may be gone
      tensor<T, shape<B, H, Q, DK>, Device> d_q(q.extents(), uninitialized);
      tensor<T, shape<B, G, K, DK>, Device> d_k(k.extents(), uninitialized);
      tensor<T, shape<B, G, K, DV>, Device> d_v(v.extents(), uninitialized);
      attn::fused_attention<Device>::backward(p, q.value().data(), k.value().data(), v.value().data(),
                                              bias_copy ? bias_copy->data() : nullptr, out.value().data(), out.grad().data(), lse->data(), d_q.data(),
                                              d_k.data(), d_v.data(), rule);
      if (q.requires_grad()) q.accumulate(std::move(d_q));
      if (k.requires_grad()) k.accumulate(std::move(d_k));
      if (v.requires_grad()) v.accumulate(std::move(d_v));
    });
  }
  return out;
}

}  // namespace attn::grad
