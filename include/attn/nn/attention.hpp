// Scaled dot-product attention (paper §3.2.1, eq. (1)) and multi-head attention (§3.2.2), the
// attention itself given by a variant (nn/variant.hpp; the paper's by default).
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <utility>

#include "../grad/heads.hpp"
#include "../grad/product.hpp"
#include "../grad/softmax.hpp"
#include "context.hpp"
#include "dims.hpp"
#include "linear.hpp"
#include "precision.hpp"
#include "variant.hpp"

namespace attn::nn {

/// softmax(Q Kᵀ / √d_k + mask) V for every head: q [B, H, Q, d_k], k [B, H, keys, d_k],
/// v [B, H, keys, d_v], mask [B, Q, keys] (0 or `masked`). Returns [B, H, Q, d_v].
template <class T, class B, class H, class Q, class DK, class DV, class Device>
grad::variable<T, shape<B, H, Q, DV>, Device> scaled_dot_product_attention(
    const context& ctx, const grad::variable<T, shape<B, H, Q, DK>, Device>& q,
    const grad::variable<T, shape<B, H, keys, DK>, Device>& k,
    const grad::variable<T, shape<B, H, keys, DV>, Device>& v, const tensor<T, shape<B, Q, keys>, Device>& mask,
    attention_kind kind = attention_kind::encoder_self) {
  using A = accumulate_t<T>;  // 1/√d_k in float for 16-bit activations
  const A scale = A(1) / std::sqrt(A(q.extents().template extent<DK>()));
  auto scores = grad::product<DK>(ctx.tape, q, k);                    // [B, H, Q, keys]
  auto weights = grad::softmax<keys>(ctx.tape, scores, scale, mask);  // rows sum to 1
  if (ctx.attention != nullptr) ctx.attention->add(kind, weights.value());
  return grad::product<keys>(ctx.tape, weights, v);  // [B, H, Q, d_v]
}

/// MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).
/// The h projections of a kind are one [d_model, h·d_k] matrix, split into heads after the product.
/// Variant says how queries attend (nn/variant.hpp); by default the one configuration C names.
template <class T, class C, class Device = cpu, class Variant = variant_of<T, C, Device>>
struct multi_head_attention {
  using A = activation_t<T>;
  using P = parameter_t<T>;
  using variant_type = Variant;
  using d_model = typename C::d_model;
  using heads = typename C::heads;
  using kv_heads = kv_heads_of<Variant, C>;  // h, or fewer when heads share keys and values
  using d_k = typename C::d_k;
  using d_v = typename C::d_v;
  using key_width = std::conditional_t<std::is_same_v<kv_heads, heads>, typename C::query_width,
                                       dim<"kv_heads_d_k", kv_heads::extent * d_k::extent>>;
  using value_width = std::conditional_t<std::is_same_v<kv_heads, heads>, typename C::value_width,
                                         dim<"kv_heads_d_v", kv_heads::extent * d_v::extent>>;

  linear<T, d_model, typename C::query_width, Device> query;
  linear<T, d_model, key_width, Device> key;
  linear<T, d_model, value_width, Device> value;
  linear<T, typename C::value_width, d_model, Device> output;

  attention_kind kind;  // names the weights in an attention record
  Variant variant;
  double weight_dropout;  // on the attention weights, when training (0 in the paper)

  /// `spec` gives a variant its arguments, or chooses one (one_of); drawn after the projections,
  /// so that the paper's model draws the same numbers as before variants existed.
  explicit multi_head_attention(random_stream& init, attention_kind k = attention_kind::encoder_self,
                                const variant_spec& spec = {}, double attention_dropout = 0)
      : query(init, fused_width(k, true)),
        key(init, fused_width(k, false)),
        value(init, fused_width(k, false)),
        output(init),
        kind(k),
        variant(make_variant<Variant>(init, k, spec)),
        weight_dropout(attention_dropout) {}

  /// The width of the matrix the authors' tensor2tensor draws a projection as part of (Xavier's
  /// fan_out): self-attention computes Q, K and V with one [d_model, 2·h·d_k + h·d_v] matrix
  /// ("qkv_transform"); encoder-decoder attention Q alone ("q_transform") and K, V together
  /// ("kv_transform", [d_model, h·d_k + h·d_v]). With h·d_k = h·d_v = d_model, self-attention's
  /// W^Q, W^K, W^V then have variance 1 / (2·d_model), half that of a [d_model, d_model] matrix
  /// drawn alone, as in PyTorch's nn.MultiheadAttention (which fuses all three in both kinds of
  /// attention). attn drew them alone until issue 14, and trained slower than PyTorch for it
  /// (docs/model.md has the measurements).
  static index_t fused_width(attention_kind k, bool is_query) {
    const index_t queries = C::query_width::extent, key_columns = key_width::extent, values = value_width::extent;
    if (k != attention_kind::encoder_decoder) return queries + key_columns + values;
    return is_query ? queries : key_columns + values;
  }

  /// Queries from x [B, Q, d_model] attend to memory [B, K, d_model] (x itself for
  /// self-attention) under mask [B, Q, keys].
  template <class B, class Q, class K>
  grad::variable<A, shape<B, Q, d_model>, Device> operator()(
      const context& ctx, const grad::variable<A, shape<B, Q, d_model>, Device>& x,
      const grad::variable<A, shape<B, K, d_model>, Device>& memory,
      const attention_mask<A, B, Q, Device>& mask) const {
    if (auto in_rows = attend_in_rows(ctx, x, memory, mask)) return std::move(*in_rows);
    auto [k, v] = keys_and_values(ctx, memory);
    return attend(ctx, x, k, v, mask);
  }

  /// operator() by the fused kernel on the projections' rows, where the variant (one_of's
  /// chosen one) takes the fused path (detail::takes_fused_path); nothing where it does not. The
  /// kernel reads the heads where the projections leave them, side by side in each row, and
  /// writes them there for W^O: no split of Q, K and V, no merge of the heads
  /// (grad::fused_attention_in_rows).
  template <class B, class Q, class K>
  std::optional<grad::variable<A, shape<B, Q, d_model>, Device>> attend_in_rows(
      const context& ctx, const grad::variable<A, shape<B, Q, d_model>, Device>& x,
      const grad::variable<A, shape<B, K, d_model>, Device>& memory,
      const attention_mask<A, B, Q, Device>& mask) const {
    const auto with = [&]([[maybe_unused]] const auto& chosen)
        -> std::optional<grad::variable<A, shape<B, Q, d_model>, Device>> {
      using V = std::remove_cvref_t<decltype(chosen)>;
      if constexpr (fuses_in_rows<V, B, Q>) {
        const index_t queries = x.extents().template extent<Q>(), key_count = memory.extents().template extent<K>();
        detail::check_mask(mask, x.extents().template extent<B>(), queries, key_count);
        if (detail::takes_fused_path<true, V, scores<B, Q>, Device>(chosen, ctx, queries, key_count,
                                                                     std::max(d_k::extent, d_v::extent))) {
          const auto k = key(ctx, memory);
          const auto v = value(ctx, memory);
          const auto q = query(ctx, x);
          return output(ctx, detail::fused_variant_attention<heads>(
                                 chosen, ctx, mask, 0, d_k::extent, weight_dropout, [&](const auto&... arguments) {
                                   return grad::fused_attention_in_rows<heads, typename C::value_width, keys>(
                                       ctx.tape, {heads::extent, kv_heads::extent}, q, k, v, arguments...);
                                 }));
        }
      }
      return std::nullopt;
    };
    if constexpr (requires { variant.visit(with); }) return variant.visit(with);
    else return with(variant);
  }

  template <class B>
  using key_heads = grad::variable<A, shape<B, kv_heads, keys, d_k>, Device>;
  template <class B>
  using value_heads = grad::variable<A, shape<B, kv_heads, keys, d_v>, Device>;
  template <class B, class Q>
  using query_heads = grad::variable<A, shape<B, heads, Q, d_k>, Device>;
  template <class B, class Q>
  using scores = tensor<A, shape<B, heads, Q, keys>, Device>;

  /// Whether operator() may hand the projections' rows to the fused kernel as they are under
  /// variant V: a dot-product variant that does not choose its own attention (one_of's chosen one
  /// is asked instead), on a device with the kernel (whether it does, detail::takes_fused_path
  /// says a call at a time).
  template <class V, class B, class Q>
  static constexpr bool fuses_in_rows =
      fused_attention<Device>::available &&
      !detail::attends_itself<V, query_heads<B, Q>, key_heads<B>, value_heads<B>, attention_mask<A, B, Q, Device>> &&
      detail::scores_by_product<V, kv_heads, query_heads<B, Q>, key_heads<B>>;

  /// memory [B, K, d_model] projected to the heads' keys and values. Incremental decoding keeps
  /// them: the encoder's once per sentence, the decoder's one position at a time.
  template <class B, class K>
  std::pair<key_heads<B>, value_heads<B>> keys_and_values(
      const context& ctx, const grad::variable<A, shape<B, K, d_model>, Device>& memory) const {
    return {grad::split_heads<kv_heads, d_k, keys>(ctx.tape, key(ctx, memory)),
            grad::split_heads<kv_heads, d_v, keys>(ctx.tape, value(ctx, memory))};
  }

  /// Queries from x [B, Q, d_model] attend to keys and values already split into heads. The
  /// first query is at position `first_query` (incremental decoding runs one at a time).
  template <class B, class Q>
  grad::variable<A, shape<B, Q, d_model>, Device> attend(const context& ctx,
                                                         const grad::variable<A, shape<B, Q, d_model>, Device>& x,
                                                         const key_heads<B>& k, const value_heads<B>& v,
                                                         const attention_mask<A, B, Q, Device>& mask,
                                                         index_t first_query = 0) const {
    auto q = grad::split_heads<heads, d_k, Q>(ctx.tape, query(ctx, x));
    auto attended = variant_attention(variant, ctx, q, k, v, mask, kind, first_query, weight_dropout);
    return output(ctx, grad::merge_heads<typename C::value_width>(ctx.tape, attended));
  }

  void collect(grad::parameter_list<P, Device>& list) {
    list.add_module("query", query);
    list.add_module("key", key);
    list.add_module("value", value);
    list.add_module("output", output);
    if constexpr (requires { variant.collect(list); }) list.add_module("variant", variant);
  }
};

}  // namespace attn::nn
