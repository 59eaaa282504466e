// Attention variants: what a policy given to multi_head_attention may say, and attention
// (paper §3.2.1, eq. (1)) computed from it. A variant is a class template
// `template <class T, class C, class Device> struct my_variant` whose members, all optional, say
//   (a) how a query meets a key:     `score(ctx, q, k)` → scores [batch, heads, queries, keys]
//                                    (default Q·Kᵀ) and `scale<A>(d_k)` (default 1/√d_k);
//   (b) how a score is modified at its coordinates: `modify(s, first_query, inputs...)`, an
//       elementwise expression of the scaled scores s (query_index, key_index, head_index give
//       the coordinates) and of `modification_inputs(ctx)` (a tuple of variables: learned
//       parameters get their gradients from the expression's derivative, grad/map.hpp);
//   (c) which pairs may attend: `allowed(query_index, key_index)`, a bool expression combined
//       with the padding and causal masks, and `kernel_rule(first_query)`, the same rule in the
//       fused kernels' form (core/fused_attention.hpp: key_band), with which they skip the tiles
//       outside the rule; without it they ask `allowed` a pair at a time (grad::pair_rule, its
//       spans from its bounds), building no [batch, queries, keys] mask unless the expression
//       reads more than the pair's coordinates;
//   (d) how many key/value heads there are: `using kv_heads = dim<"kv_heads", G>` (default h);
// plus `applies()` (whether (b) and (c) apply to this attention, default yes), `collect(list)`
// for parameters and a constructor from (random_stream&, attention_kind, const variant_spec&).
// A configuration names its variant: `template <class T, class C, class D> using attention = ...`.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../expr/iota.hpp"
#include "../grad/heads.hpp"
#include "../grad/fused_attention.hpp"
#include "../grad/map.hpp"
#include "../grad/product.hpp"
#include "../grad/softmax.hpp"
#include "context.hpp"
#include "dims.hpp"
#include "masks.hpp"

namespace attn::nn {

/// A variant named at run time, "NAME[:ARG]" (attn-train --attention): "restricted:9".
struct variant_spec {
  std::string name, argument;

  static variant_spec parse(std::string_view text) {
    const auto colon = text.find(':');
    if (colon == std::string_view::npos) return {std::string(text), {}};
    return {std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
  }
  std::string str() const { return argument.empty() ? name : name + ":" + argument; }

  /// The argument as a positive integer, for variant `who`.
  index_t positive_argument(std::string_view who) const {
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(argument, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != argument.size() || value <= 0)
      throw std::invalid_argument("attention variant " + std::string(who) + " needs a positive integer argument (" +
                                  std::string(who) + ":N), not '" + argument + "'");
    return index_t(value);
  }
};

/// Coordinates of scores s [batch, heads, queries, keys] as expressions of s's element type.
/// `first_query` is the position of the first query: incremental decoding runs one at a time.
template <class S>
auto query_index(const S& s, index_t first_query) {
  return index_along<dim_at<shape_t<S>, 2>>(s, accumulate_t<value_t<S>>(first_query));
}
template <class S>
auto key_index(const S& s) {
  return index_along<keys>(s);
}
template <class S>
auto head_index(const S& s) {
  return index_along<dim_at<shape_t<S>, 1>>(s);
}

template <class T, class C, class Device>
struct scaled_dot_product;

namespace detail {

template <class T, class C, class Device>
struct variant_of {
  using type = scaled_dot_product<T, C, Device>;
};
template <class T, class C, class Device>
  requires requires { typename C::template attention<T, C, Device>; }
struct variant_of<T, C, Device> {
  using type = typename C::template attention<T, C, Device>;
};

template <class V, class C>
struct kv_heads_of {
  using type = typename C::heads;
};
template <class V, class C>
  requires requires { typename V::kv_heads; }
struct kv_heads_of<V, C> {
  using type = typename V::kv_heads;
  static_assert(C::heads::extent % type::extent == 0,
                "attn::nn: a variant's key/value heads must divide the query heads");
};

template <class V, class S, class Inputs>
inline constexpr bool can_modify = false;
template <class V, class S, class... In>
inline constexpr bool can_modify<V, S, std::tuple<In...>> =
    requires(const V& v, const S& s, const In&... in) { v.modify(s, index_t{}, in.value()...); };

template <class V>
inline constexpr bool has_mask_rule = requires(const V& v, const tensor<float, shape<batch, tgt, keys>>& m) {
  v.allowed(index_along<tgt>(m), index_along<keys>(m));
};

template <class V>
inline constexpr bool has_kernel_rule = requires(const V& v) { v.kernel_rule(index_t{}); };
template <class V>
inline constexpr bool kernel_rule_has_expression = !has_kernel_rule<V> || has_mask_rule<V>;

template <class V>
bool applies(const V& v) {
  if constexpr (requires { v.applies(); }) return v.applies();
  else return true;
}

template <class V>
auto modification_inputs(const V& v, const context& ctx) {
  if constexpr (requires { v.modification_inputs(ctx); }) return v.modification_inputs(ctx);
  else return std::tuple<>{};
}

/// [B, H, L, D] → [B, G, H/G·L, D]: the queries of the H/G heads that share a key/value head
/// as one block of rows, so that grouped-query attention is two products with no copy of K or V.
template <class G, class H, class T, class B, class L, class D, class Device>
auto group_heads(grad::tape* t, const grad::variable<T, shape<B, H, L, D>, Device>& x) {
  if constexpr (std::is_same_v<G, H>) {
    return x;
  } else {
    using R = dim<"heads_per_group", H::extent / G::extent>;
    using grouped = dim<"grouped_queries">;
    grad::variable<T, shape<B, G, grouped, D>, Device> y(merge<R, L, grouped>(split<H, G, R>(x.value())),
                                                         grad::recording(t, x));
    if (y.requires_grad())
      t->record([x = x.without_value(), y = y.without_value()] {
        if (y.has_grad()) x.accumulate(merge<G, R, H>(split<grouped, R, L>(y.grad())));
      });
    return y;
  }
}

/// The inverse of group_heads: [B, G, H/G·L, D] → [B, H, L, D].
template <class H, class L, class T, class B, class G, class GL, class D, class Device>
auto ungroup_heads(grad::tape* t, const grad::variable<T, shape<B, G, GL, D>, Device>& x) {
  if constexpr (std::is_same_v<G, H>) {
    return x;
  } else {
    using R = dim<"heads_per_group", H::extent / G::extent>;
    grad::variable<T, shape<B, H, L, D>, Device> y(merge<G, R, H>(split<GL, R, L>(x.value())), grad::recording(t, x));
    if (y.requires_grad())
      t->record([x = x.without_value(), y = y.without_value()] {
        if (y.has_grad()) x.accumulate(merge<R, L, GL>(split<H, G, R>(y.grad())));
      });
    return y;
  }
}

}  // namespace detail

/// The variant configuration C names (C::attention), else the paper's.
template <class T, class C, class Device>
using variant_of = typename detail::variant_of<T, C, Device>::type;

/// Key/value heads of variant V in configuration C.
template <class V, class C>
using kv_heads_of = typename detail::kv_heads_of<V, C>::type;

/// Variant V for attention `kind`, from `spec` when V takes one. A spec naming another variant
/// is refused: a checkpoint's variant must be the model's.
template <class V>
V make_variant(random_stream& init, attention_kind kind, const variant_spec& spec) {
  if constexpr (requires { std::string_view(V::name); }) {
    if (!spec.name.empty() && spec.name != V::name)
      throw std::invalid_argument("attention variant '" + spec.name + "' asked of a model whose attention is '" +
                                  std::string(V::name) + "'");
  }
  if constexpr (std::is_constructible_v<V, random_stream&, attention_kind, const variant_spec&>)
    return V(init, kind, spec);
  else
    return V{};
}

namespace detail {

/// The mask's sizes against the attention's.
template <class A, class B, class Q, class Device>
void check_mask(const attention_mask<A, B, Q, Device>& mask, index_t sentences, index_t queries, index_t keys) {
  if (mask.sentences() != sentences || mask.queries() != queries || mask.key_count() != keys)
    throw extent_error("attn::nn::variant_attention", "mask",
                       "a mask of " + std::to_string(mask.sentences()) + " sentences, " +
                           std::to_string(mask.queries()) + " queries and " + std::to_string(mask.key_count()) +
                           " keys for " + std::to_string(sentences) + ", " + std::to_string(queries) + " and " +
                           std::to_string(keys));
}

/// The scale of variant V's scores for heads d_k wide: 1/√d_k (§3.2.1) unless V says otherwise.
/// In float for 16-bit activations: 1/√d_k is rarely a 16-bit number.
template <class V, class A>
accumulate_t<A> scale_of(index_t d_k) {
  using C = accumulate_t<A>;
  if constexpr (requires { V::template scale<C>(d_k); }) return V::template scale<C>(d_k);
  else return C(1) / std::sqrt(C(d_k));
}

/// The mask [batch, queries, keys] with the variant's rule folded in, where the rule applies and
/// V has one as an expression: the unfused path's, and the fused one's when the rule reads more
/// than a pair's coordinates.
template <class V, class A, class B, class Q, class Device>
std::optional<tensor<A, shape<B, Q, keys>, Device>> ruled_mask(const V& variant,
                                                               const attention_mask<A, B, Q, Device>& mask,
                                                               index_t first_query) {
  if constexpr (has_mask_rule<V>) {
    if (applies(variant))
      return tensor<A, shape<B, Q, keys>, Device>(where(
          variant.allowed(index_along<Q>(mask.bias(), accumulate_t<A>(first_query)), index_along<keys>(mask.bias())),
          mask.bias(), masked<A>));
  }
  return std::nullopt;
}

/// Whether variant V computes attention itself (one_of: choosing a variant at run time) from
/// queries Qv, keys Kv, values Vv and mask M.
template <class V, class Qv, class Kv, class Vv, class M>
inline constexpr bool attends_itself =
    requires(const V& variant, const context& ctx, const Qv& q, const Kv& k, const Vv& v, const M& mask) {
      variant.attend(ctx, q, k, v, mask, attention_kind{}, index_t{}, double{});
    };

/// Whether variant V scores queries of type Qv against keys of type Kv with Q·Kᵀ (the dot-product
/// family, which the fused kernel computes) rather than a score function of its own.
template <class V, class G, class Qv, class Kv>
inline constexpr bool scores_by_product = !requires(const V& v, const context& ctx, const Kv& k) {
  v.score(ctx, group_heads<G>(ctx.tape, std::declval<const Qv&>()), k);
};

/// Whether variant V's attention over `queries` queries and `keys` keys, in heads `head_width`
/// wide (the wider of d_k and d_v), takes the device's fused kernel: it can compute it (Product:
/// a dot product, modified or not, with nobody asking for the weights; heads no wider than the
/// kernel's widest) and, unless the context asks for a path, it pays: keys many enough
/// (fused_attention<Device>::automatic_from_keys and automatic_from_queries,
/// automatic_modified_from_keys for a modified variant), on the kernel's fast road for the
/// scores' element type and the heads' width (fast_for; docs/fused-attention.md). Throws where
/// the context asks for the fused path and it cannot be taken. S: the scores' tensor type.
template <bool Product, class V, class S, class Device>
bool takes_fused_path(const V& variant, const context& ctx, index_t queries, index_t keys, index_t head_width) {
  using inputs_type = decltype(modification_inputs(variant, ctx));
  using kernel = fused_attention<Device>;
  const bool modifies = can_modify<V, S, inputs_type> && applies(variant);
  static constexpr const char* too_wide = "the device's kernel takes heads up to ";  // its width and ours follow
  const char* unfusable = !kernel::available                ? "the device has no fused attention kernel"
                          : !Product                        ? "the variant scores with a function of its own"
                          : ctx.attention != nullptr        ? "the attention weights are being recorded"
                          : head_width > kernel::widest_head ? too_wide
                          : modifies && !kernel::modifies_scores
                              ? "the device's kernel does not evaluate score modifications yet"
                              : nullptr;
  if (ctx.path == attention_path::fused && unfusable)
    throw std::invalid_argument(std::string("attn::nn: fused attention was asked for, but ") + unfusable +
                                (unfusable == too_wide ? std::to_string(kernel::widest_head) + " wide, not " +
                                                             std::to_string(head_width)
                                                       : std::string()));
  if (unfusable || ctx.path != attention_path::automatic) return !unfusable && ctx.path == attention_path::fused;
  const bool enough = modifies ? keys >= kernel::automatic_modified_from_keys
                               : keys >= kernel::automatic_from_keys && queries >= kernel::automatic_from_queries;
  return enough && kernel::template fast_for<typename S::value_type>(head_width);
}

/// Variant V's score modification for queries from position first_query, as grad::modify_scores
/// takes it (the kernels are instantiated for the expression it returns, whichever route calls).
template <class V>
struct modification_of {
  const V* policy;  // outlives the tape: the variant is a module's member
  index_t first_query;
  template <class S, class... X>
  auto operator()(const S& s, const X&... x) const {
    return policy->modify(s, first_query, x...);
  }
};

/// Variant V's attention by the fused kernel: call(visible, scale, bias, rule, modification,
/// dropout, backward), the arguments grad::fused_attention takes after q, k and v, with the
/// variant's. The mask's key counts and causality say what each query sees, the variant's rule
/// (its kernel form, else its expression a pair at a time) which pairs it allows, with a bias
/// only where they cannot (a rule that reads more than a pair's coordinates folded in, padding
/// between tokens); the kernel skips the key tiles they hide entirely (after the diagonal when
/// causal, past a sentence's end, outside restricted attention's band) and applies the
/// modification a score at a time. The kernel's positions count from 0 here (the mask's causal
/// positions count from its first query, as its bias's do), so first_query is the rule's to add:
/// kernel_rule folds it into the band, the pair rule into its query positions, and
/// key_visibility must not add it again. H names the scores' heads (S: [B, H, Q, keys]).
template <class H, class V, class A, class B, class Q, class Device, class Call>
auto fused_variant_attention(const V& variant, const context& ctx, const attention_mask<A, B, Q, Device>& mask,
                             index_t first_query, index_t d_k, double weight_dropout, const Call& call) {
  using S = tensor<A, shape<B, H, Q, keys>, Device>;
  using inputs_type = decltype(modification_inputs(variant, ctx));
  const bool rules = applies(variant);
  const grad::key_visibility<B, Device> visible{mask.key_lengths(), mask.causal(), 0};
  const grad::weight_dropout on_weights{weight_dropout, ctx.dropout};
  const auto backward = ctx.deterministic ? grad::fused_backward::deterministic : grad::fused_backward::fastest;
  const auto scale = scale_of<V, A>(d_k);
  const auto fused = [&](const auto& rule, const tensor<A, shape<B, Q, keys>, Device>* bias) {
    if constexpr (can_modify<V, S, inputs_type> && fused_attention<Device>::modifies_scores) {
      if (rules) {
        return std::apply(
            [&](const auto&... in) {
              return call(visible, scale, bias, rule,
                          grad::modify_scores(modification_of<V>{&variant, first_query}, in...), on_weights,
                          backward);
            },
            modification_inputs(variant, ctx));
      }
    }
    return call(visible, scale, bias, rule, unmodified{}, on_weights, backward);
  };
  const auto* mask_bias = mask.kernel_form() ? nullptr : &mask.bias();
  if constexpr (has_kernel_rule<V>) {
    if (rules) return fused(variant.kernel_rule(first_query), mask_bias);
  } else if constexpr (has_mask_rule<V>) {
    // A rule with no kernel form, asked a pair at a time over one sentence's pairs, where the
    // kernel's position i (from 0, as above) is the rule's first_query + i.
    const auto allowed = grad::over_pairs<A, B, Q, keys, Device>(
        [&](const auto& query, const auto& key) { return variant.allowed(query, key); }, mask.queries(),
        mask.key_count(), accumulate_t<A>(first_query));
    if constexpr (computed_from<std::remove_cvref_t<decltype(allowed)>, Q, keys>) {
      if (rules) return fused(grad::pair_rule{allowed}, mask_bias);
    }
  }
  const auto ruled = ruled_mask(variant, mask, first_query);  // a rule that reads more than the pair's coordinates
  return fused(every_pair{}, ruled ? &*ruled : mask_bias);
}

}  // namespace detail

/// softmax(score(Q, K) · scale + modification + mask) V with the variant's rules (eq. (1) for
/// the paper's): q [B, H, Q, d_k], k [B, G, keys, d_k], v [B, G, keys, d_v] with G key/value
/// heads, under `mask` (nn/masks.hpp: which keys each query sees), dropout with probability weight_dropout on the weights
/// when the context carries a random stream (the paper has none there). Returns [B, H, Q, d_v].
/// By the device's fused kernel (grad/fused_attention.hpp, detail::fused_variant_attention) when
/// detail::takes_fused_path says so (the variant's score modification, if any, evaluated inside
/// the kernel), else by products and a softmax.
template <class V, class A, class B, class H, class Q, class G, class DK, class DV, class Device>
grad::variable<A, shape<B, H, Q, DV>, Device> variant_attention(
    const V& variant, const context& ctx, const grad::variable<A, shape<B, H, Q, DK>, Device>& q,
    const grad::variable<A, shape<B, G, keys, DK>, Device>& k, const grad::variable<A, shape<B, G, keys, DV>, Device>& v,
    const attention_mask<A, B, Q, Device>& mask, attention_kind kind, index_t first_query = 0,
    double weight_dropout = 0) {
  static_assert(!requires { variant.attend(ctx, q, k, v, mask, kind, first_query); } ||
                    requires { variant.attend(ctx, q, k, v, mask, kind, first_query, weight_dropout); },
                "attn::nn: a variant's attend(ctx, q, k, v, mask, kind, first_query) takes weight_dropout last");
  const index_t queries = q.extents().template extent<Q>(), key_count = k.extents().template extent<keys>();
  detail::check_mask(mask, q.extents().template extent<B>(), queries, key_count);
  if constexpr (requires { variant.attend(ctx, q, k, v, mask, kind, first_query, weight_dropout); }) {
    return variant.attend(ctx, q, k, v, mask, kind, first_query, weight_dropout);  // chooses at run time
  } else {
    const index_t d_k = q.extents().template extent<DK>();
    using C = accumulate_t<A>;
    C scale = detail::scale_of<V, A>(d_k);
    static_assert(detail::kernel_rule_has_expression<V>,
                  "attn::nn: a variant with a kernel_rule must give the same rule as allowed(query, key) too, "
                  "for the unfused path");
    const bool rules = detail::applies(variant);
    using S = tensor<A, shape<B, H, Q, keys>, Device>;
    constexpr bool product = detail::scores_by_product<V, G, std::remove_cvref_t<decltype(q)>,
                                                       std::remove_cvref_t<decltype(k)>>;
    const index_t head_width = std::max(d_k, v.extents().template extent<DV>());
    if (detail::takes_fused_path<product, V, S, Device>(variant, ctx, queries, key_count, head_width)) {
      if constexpr (fused_attention<Device>::available && product)
        return detail::fused_variant_attention<H>(variant, ctx, mask, first_query, d_k, weight_dropout,
                                                  [&](const auto&... arguments) {
                                                    return grad::fused_attention(ctx.tape, q, k, v, arguments...);
                                                  });
    }
    const auto ruled = detail::ruled_mask(variant, mask, first_query);

    auto grouped = detail::group_heads<G>(ctx.tape, q);
    auto scores = [&] {
      if constexpr (requires { variant.score(ctx, grouped, k); })
        return detail::ungroup_heads<H, Q>(ctx.tape, variant.score(ctx, grouped, k));
      else
        return detail::ungroup_heads<H, Q>(ctx.tape, grad::product<DK>(ctx.tape, grouped, k));
    }();  // [B, H, Q, keys]
    static_assert(std::is_same_v<typename decltype(scores)::tensor_type, S>,
                  "attn::nn: a variant's score(ctx, q, k) must give scores [batch, heads, queries, keys] of the "
                  "activation type");

    using inputs_type = decltype(detail::modification_inputs(variant, ctx));
    if constexpr (detail::can_modify<V, S, inputs_type>) {
      if (rules) {  // the inputs (a parameter's cast, a constant's copy) only when they are read
        const auto inputs = detail::modification_inputs(variant, ctx);
        const V* policy = &variant;  // outlives the tape: the variant is a module's member
        auto modified = std::apply(
            [&](const auto&... in) {
              return grad::map(
                  ctx.tape,
                  [policy, scale, first_query](const auto& s, const auto&... x) {
                    return policy->modify(s * scale, first_query, x...);
                  },
                  scores, in...);
            },
            inputs);
        static_assert(std::is_same_v<decltype(modified), decltype(scores)>,
                      "attn::nn: a variant's score modification must keep the scores' shape and type "
                      "[batch, heads, queries, keys]: it is elementwise");
        scores = modified;
        scale = C(1);
      }
    }
    auto weights = grad::softmax<keys>(ctx.tape, scores, scale, ruled ? *ruled : mask.bias());  // rows sum to 1
    if (ctx.attention != nullptr) ctx.attention->add(kind, weights.value());
    weights = dropout(ctx, weights, weight_dropout);  // on the weights, when asked (not in the paper)
    return detail::ungroup_heads<H, Q>(
        ctx.tape, grad::product<keys>(ctx.tape, detail::group_heads<G>(ctx.tape, weights), v));  // [B, H, Q, d_v]
  }
}

/// The paper's attention (eq. (1)): scores Q·Kᵀ scaled by 1/√d_k, "to counteract" the growth
/// of dot products with d_k (§3.2.1, footnote 4).
template <class T, class C, class Device>
struct scaled_dot_product {
  static constexpr std::string_view name = "scaled";
  template <class A>
  static A scale(index_t d_k) {
    return A(1) / std::sqrt(A(d_k));
  }
};

/// Dot-product attention without the scale (§3.2.1's contrast: "identical to our algorithm,
/// except for the scaling factor").
template <class T, class C, class Device>
struct dot_product {
  static constexpr std::string_view name = "unscaled";
  template <class A>
  static A scale(index_t) {
    return A(1);
  }
};

}  // namespace attn::nn
