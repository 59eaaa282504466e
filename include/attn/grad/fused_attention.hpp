// Differentiable fused attention: eq. (1), softmax(scale · Q·Kᵀ + masks) · V, by the device's
// tiled kernel (core/fused_attention.hpp), which keeps the rows' log-sum-exp instead of the
// [queries, keys] weights; the backward recomputes them a tile at a time. A variant's score
// modification, an elementwise expression as for grad::map, is evaluated by the kernel a score
// at a time (expr/element.hpp), and its learned inputs get their gradients from the kernel's
// backward through the expression's derivative.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/fused_attention.hpp"
#include "../core/transfer.hpp"
#include "../expr/bounds.hpp"
#include "../expr/element.hpp"
#include "variable.hpp"

namespace attn::grad {

/// Dropout on the attention weights with probability p, from `stream` (null or p = 0: none). It
/// takes batch·heads·queries·keys numbers, as grad::dropout of the weights would, and drops the
/// same weights.
struct weight_dropout {
  double p = 0;
  random_stream* stream = nullptr;
};

/// How fused attention's backward may order its sums: `fastest` lets a device add dQ with
/// atomics (the GPU's tensor-core kernels, FlashAttention-2's schedule: dQ's last bits then vary
/// from run to run), `deterministic` asks for the same bits every run (on a GPU a second kernel
/// for dQ; docs/fused-attention.md). The CPU's backward is deterministic either way.
enum class fused_backward { fastest, deterministic };

/// A score modification: f(s, x₀, x₁, …) an elementwise expression of the scaled scores s
/// [batch, heads, queries, keys] and of the variables x (which it may broadcast, and combine with
/// coordinates: attn::index_along). Called on the kernel's placeholder for s and the inputs'
/// values; it must be a pure function of them.
template <class F, class... X>
struct score_modification {
  F f;
  std::tuple<X...> inputs;
};

/// The modification f(s, inputs...) for fused_attention.
template <class F, class... X>
score_modification<F, X...> modify_scores(F f, const X&... inputs) {
  return {std::move(f), std::tuple<X...>(inputs...)};
}

namespace detail {

/// The numbers of a modification's learned inputs' gradients, one input after another.
using modification_gradients = dim<"modification_gradients">;

/// What a kernel evaluates of a modification (core/fused_attention.hpp): the modified score, its
/// derivative by the score, and d_score · its derivative by each input that wants a gradient,
/// added at that input's element in a buffer holding the inputs one after another. T is the
/// kernel's compute type (float for 16-bit scores), in which element_at evaluates the expression.
/// The members are the host's evaluation; a GPU kernel makes its own of the expressions (the
/// CUDA backend's plans: cuda/attn/cuda/score_modification.cuh).
template <class T, class E, class Slope, class Partials, std::size_t Inputs>
struct evaluated_modification {
  E score;
  Slope slope;
  Partials partials;  // derivative<1 + k>(score), or expr::zero
  std::array<index_t, Inputs> offsets{};  // of input k's gradient in the buffer; −1: not wanted
  index_t size = 0;

  T operator()(const std::array<index_t, 4>& c, T s) const { return element_at(score, c, s); }
  T derivative(const std::array<index_t, 4>& c, T s) const {
    if constexpr (attn::detail::is_zero<Slope>) return T(0);
    else return element_at(slope, c, s);
  }
  index_t gradient_size() const { return size; }
  void accumulate(const std::array<index_t, 4>& c, T s, T d_score, T* gradients) const {
    accumulate_inputs(c, s, d_score, gradients, std::make_index_sequence<Inputs>{});
  }

 private:
  template <std::size_t... K>
  void accumulate_inputs([[maybe_unused]] const std::array<index_t, 4>& c, [[maybe_unused]] T s,
                         [[maybe_unused]] T d_score, [[maybe_unused]] T* gradients,
                         std::index_sequence<K...>) const {
    (accumulate_input<K>(c, s, d_score, gradients), ...);
  }
  template <std::size_t K>
  void accumulate_input(const std::array<index_t, 4>& c, T s, T d_score, T* gradients) const {
    using partial = std::tuple_element_t<K, Partials>;
    if constexpr (!attn::detail::is_zero<partial>) {
      if (offsets[K] < 0) return;
      const index_t at = input_offset<K + 1>(score, c);
      assert(at >= 0);  // an input with a derivative is read
      gradients[offsets[K] + at] += d_score * element_at(std::get<K>(partials), c, s);
    }
  }
};

/// f(scores, x...) over a placeholder of the scores' sizes, ready for the kernel, the inputs read
/// from x (tensors or views); wants[k]: whether input k's gradient is gathered.
template <class T, class S, class Device, class F, class... X>
auto evaluate_modification_of(const F& f, const extents<S>& scores, const std::array<bool, sizeof...(X)>& wants,
                              const X&... x) {
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto score = f(input<0>(placeholder<T, Device>(scores)), input<K + 1>(x)...);
    static_assert(std::is_same_v<shape_t<decltype(score)>, S> && std::is_same_v<value_t<decltype(score)>, T>,
                  "attn::grad::fused_attention: a score modification must keep the scores' shape and type "
                  "[batch, heads, queries, keys]: it is elementwise");
    auto slope = derivative<0>(score);
    auto partials = std::tuple{derivative<K + 1>(score)...};
    evaluated_modification<accumulate_t<T>, decltype(score), decltype(slope), decltype(partials), sizeof...(X)> e{
        score, slope, partials, {}, 0};
    ((e.offsets[K] = wants[K] ? std::exchange(e.size, e.size + x.extents().size()) : -1), ...);
    return e;
  }(std::index_sequence_for<X...>{});
}

template <class T, class S, class Device>
unmodified evaluate_modification(const unmodified&, const extents<S>&, bool) {
  return {};
}
/// The modification's expression over a placeholder of the scores' sizes, ready for the kernel;
/// `wanted` says whether to gather the gradients of the inputs that require them.
template <class T, class S, class Device, class F, class... X>
auto evaluate_modification(const score_modification<F, X...>& m, const extents<S>& scores, bool wanted) {
  return std::apply(
      [&](const auto&... x) {
        return evaluate_modification_of<T, S, Device>(m.f, scores, {(wanted && x.requires_grad())...}, x.value()...);
      },
      m.inputs);
}

/// Adds each wanted input's share of the kernel's gradient buffer (host memory, in the compute type) to its
/// gradient, rounded once to the input's type.
template <class F, class... X, class E, class T>
void accumulate_modification_inputs(const score_modification<F, X...>& m, const E& evaluated,
                                    const T* gradients) {
  std::apply(
      [&](const auto&... x) {
        [[maybe_unused]] std::size_t k = 0;
        (
            [&](const auto& input) {
              const index_t offset = evaluated.offsets[k++];
              if (offset < 0) return;
              using V = std::remove_cvref_t<decltype(input)>;
              using U = typename V::value_type;
              typename V::tensor_type g(input.extents(), uninitialized);
              const std::vector<U> rounded(gradients + offset, gradients + offset + g.size());
              copy_from_host<typename V::device_type>(g.data(), std::span<const U>(rounded));
              input.accumulate(std::move(g));
            }(x),
            ...);
      },
      m.inputs);
}

}  // namespace detail

/// Which keys a query sees, without a [batch, queries, keys] tensor: the first key_lengths[b]
/// keys of sentence b (null: all), none after the query's position when causal, and those the
/// kernel's rule allows. Query i sits at position first_query + i.
template <class Batch, class Device>
struct key_visibility {
  const tensor<index_t, shape<Batch>, Device>* key_lengths = nullptr;
  bool causal = false;
  index_t first_query = 0;
};

/// A mask rule given as an expression, which the kernel asks a pair at a time instead of reading
/// a [batch, queries, keys] bias (nn's variants' `allowed` without a kernel form): `allowed` a
/// bool expression over the pairs [1, positions, keys] of one sentence, computed from the
/// coordinates along the queries and the keys alone (attn::index_along, constants), so that it
/// holds for every sentence and head. The kernel asks about the query at position p (its index
/// plus key_visibility's first_query) and key j: allowed at (0, p, j). Its spans and whether it
/// allows a whole tile (core/fused_attention.hpp, as key_band's) come from the expression's
/// bounds over blocks of pairs (expr/bounds.hpp), so that the kernels walk only the tiles it may
/// allow and skip the pair-by-pair checks where it allows them all. A GPU's kernels take its plan
/// and the plan's bounds (cuda/attn/cuda/mask_rule.cuh), the same numbers.
template <class E>
class pair_rule : public spans_from_bounds<pair_rule<E>> {
  static_assert(shape_t<E>::rank == 3 && std::is_same_v<value_t<E>, bool>,
                "attn::grad::pair_rule: a mask rule is a bool expression over pairs [batch, queries, keys]");
  static_assert(computed_from<E, dim_at<shape_t<E>, 1>, dim_at<shape_t<E>, 2>>,
                "attn::grad::pair_rule: a mask rule must be computed from the query's and the key's coordinates "
                "alone (index_along, constants): it holds for every sentence and head");

 public:
  explicit pair_rule(const E& allowed)
      : spans_from_bounds<pair_rule<E>>{allowed.extents()[1], allowed.extents()[2]}, allowed_(allowed) {}

  bool operator()(index_t position, index_t key) const { return element_at(allowed_, {0, position, key}); }
  /// The expression's bounds over a block of pairs (spans_from_bounds asks them).
  value_bounds<bool> bounds(index_t first_position, index_t last_position, index_t first_key, index_t last_key) const {
    return bounds_over(allowed_, {{0, first_position, first_key}, {0, last_position, last_key}});
  }

  const E& allowed() const { return allowed_; }

 private:
  E allowed_;
};
template <class E>
pair_rule(E) -> pair_rule<E>;

/// allowed(query, key) over one sentence's pairs [B, Q, K], for pair_rule: `allowed` is given the
/// queries' positions (`positions` of them, the first at first_position) and the keys' indices
/// (`keys` of them) as coordinate expressions in T (attn::index_along's).
template <element T, dimension B, dimension Q, dimension K, device Device = cpu, class F>
auto over_pairs(const F& allowed, index_t positions, index_t keys, accumulate_t<T> first_position = 0) {
  using pairs = shape<B, Q, K>;
  const extents<pairs> one_sentence(1, positions, keys);
  return allowed(broadcast<pairs>(iota<T, Q, Device>(positions, first_position), one_sentence),
                 broadcast<pairs>(iota<T, K, Device>(keys), one_sentence));
}

namespace detail {

/// The rows of the forward's log-sum-exp, [batch · heads · queries], whatever the layout.
using fused_rows = dim<"fused_attention_rows">;

/// grad::fused_attention and fused_attention_in_rows once `p` holds the sizes and the layout
/// of q, k and v: the output of `out_extents` (p's layout) and its backward, the modification
/// evaluated over scores of `scores`' sizes ([batch, heads, queries, keys]).
template <class T, class OS, class SS, class QS, class KS, class VS, class B, class Q, class K, class Device,
          class Rule, class Modification>
variable<T, OS, Device> fused_attention_of(tape* t, fused_attention_problem p, const extents<OS>& out_extents,
                                           const extents<SS>& scores, const variable<T, QS, Device>& q,
                                           const variable<T, KS, Device>& k, const variable<T, VS, Device>& v,
                                           const key_visibility<B, Device>& visible, accumulate_t<T> scale,
                                           const tensor<T, shape<B, Q, K>, Device>* bias, Rule rule,
                                           const Modification& modification, weight_dropout dropout,
                                           fused_backward backward) {
  p.scale = double(scale);
  p.key_lengths = visible.key_lengths ? visible.key_lengths->data() : nullptr;
  p.causal = visible.causal;
  p.first_query = visible.first_query;
  p.deterministic = backward == fused_backward::deterministic;
  if (dropout.stream != nullptr && dropout.p > 0) {
    if (dropout.p >= 1)
      throw std::invalid_argument("attn::grad::fused_attention: dropout must be below 1, got " + std::to_string(dropout.p));
    p.dropout = dropout.p;
    p.dropout_stream = *dropout.stream;
    p.dropout_start = dropout.stream->take(static_cast<std::uint64_t>(p.batch * p.heads * p.queries * p.keys));
  }
  if constexpr (requires { rule.allowed(); }) {  // a pair_rule: its expression covers the pairs
    if (rule.positions < p.first_query + p.queries || rule.keys < p.keys)
      throw std::invalid_argument("attn::grad::fused_attention: the mask rule's expression covers " +
                                  std::to_string(rule.positions) + " positions and " + std::to_string(rule.keys) +
                                  " keys, fewer than the " + std::to_string(p.first_query + p.queries) +
                                  " positions and " + std::to_string(p.keys) + " keys of the attention");
  }
  if (p.kv_heads == 0 || p.heads % p.kv_heads != 0)
    throw extent_error("attn::grad::fused_attention", "heads",
                       std::to_string(p.heads) + " query heads cannot share " + std::to_string(p.kv_heads) +
                           " key/value heads");

  const auto recorded = [&] {
    if constexpr (std::is_same_v<Modification, unmodified>) return recording(t, q, k, v);
    else return std::apply([&](const auto&... x) { return recording(t, q, k, v, x...); }, modification.inputs);
  }();
  variable<T, OS, Device> out(tensor<T, OS, Device>(out_extents, uninitialized), recorded);
  using row_shape = shape<fused_rows>;
  using A = accumulate_t<T>;  // the rows' log-sum-exp: float for 16-bit q, k, v
  tensor<A, row_shape, Device> log_sum_exp(extents<row_shape>(p.batch * p.heads * p.queries), uninitialized);
  attn::fused_attention<Device>::forward(p, q.value().data(), k.value().data(), v.value().data(),
                                         bias ? bias->data() : nullptr, out.value().data(), log_sum_exp.data(), rule,
                                         evaluate_modification<T, SS, Device>(modification, scores, false));
  if (out.requires_grad()) {
    t->record([q, k, v, out, p, rule, modification, scores,
               lse = std::make_shared<tensor<A, row_shape, Device>>(std::move(log_sum_exp)),
               lengths = visible.key_lengths ? std::make_shared<tensor<index_t, shape<B>, Device>>(*visible.key_lengths)
                                             : nullptr,
               bias_copy = bias ? std::make_shared<tensor<T, shape<B, Q, K>, Device>>(*bias) : nullptr]() mutable {
      if (!out.has_grad()) return;
      p.key_lengths = lengths ? lengths->data() : nullptr;  // the tape's own copy: the caller's may be gone
      tensor<T, QS, Device> d_q(q.extents(), uninitialized);
      tensor<T, KS, Device> d_k(k.extents(), uninitialized);
      tensor<T, VS, Device> d_v(v.extents(), uninitialized);
      const auto evaluated = evaluate_modification<T, SS, Device>(modification, scores, true);
      // The learned inputs' gradients, one after another, in the device's memory.
      index_t inputs = 0;
      if constexpr (!std::is_same_v<Modification, unmodified>) inputs = evaluated.gradient_size();
      using numbers = shape<modification_gradients>;
      tensor<A, numbers, Device> d_inputs(extents<numbers>(inputs), uninitialized);
      attn::fused_attention<Device>::backward(p, q.value().data(), k.value().data(), v.value().data(),
                                              bias_copy ? bias_copy->data() : nullptr, out.value().data(),
                                              out.grad().data(), lse->data(), d_q.data(), d_k.data(), d_v.data(), rule,
                                              evaluated, d_inputs.data());
      if (q.requires_grad()) q.accumulate(std::move(d_q));
      if (k.requires_grad()) k.accumulate(std::move(d_k));
      if (v.requires_grad()) v.accumulate(std::move(d_v));
      if constexpr (!std::is_same_v<Modification, unmodified>)
        accumulate_modification_inputs(modification, evaluated, to_host(d_inputs).data());
    });
  }
  return out;
}

/// The masks' extents against the queries' and the keys' (shared by both layouts).
template <class B, class Q, class K, class T, class QS, class KS, class Device>
void check_masks(const extents<QS>& q, const extents<KS>& k, const key_visibility<B, Device>& visible,
                 const tensor<T, shape<B, Q, K>, Device>* bias) {
  if (visible.key_lengths) check_common_extents("attn::grad::fused_attention", visible.key_lengths->extents(), q);
  if (bias) {
    check_common_extents("attn::grad::fused_attention", bias->extents(), q);
    check_common_extents("attn::grad::fused_attention", bias->extents(), k);
  }
}

}  // namespace detail

/// softmax over the visible keys of scale · q·kᵀ, modified (grad::modify_scores) when a
/// modification is given, + bias (an additive mask [B, Q, K] shared by the heads), times v:
/// q [B, H, Q, DK], k [B, G, K, DK], v [B, G, K, DV] with G key/value heads shared by H / G query
/// heads each, and `dropout` on the weights; `backward` says whether the gradients must be the
/// same bits every run. Returns [B, H, Q, DV].
template <class T, class B, class H, class Q, class G, class K, class DK, class DV, class Device,
          class Rule = every_pair, class Modification = unmodified>
variable<T, shape<B, H, Q, DV>, Device> fused_attention(tape* t, const variable<T, shape<B, H, Q, DK>, Device>& q,
                                                        const variable<T, shape<B, G, K, DK>, Device>& k,
                                                        const variable<T, shape<B, G, K, DV>, Device>& v,
                                                        const key_visibility<B, Device>& visible,
                                                        std::type_identity_t<accumulate_t<T>> scale,
                                                        std::type_identity_t<const tensor<T, shape<B, Q, K>, Device>*> bias = nullptr,
                                                        Rule rule = {}, const Modification& modification = {},
                                                        weight_dropout dropout = {},
                                                        fused_backward backward = fused_backward::fastest) {
  static_assert(!H::is_static || !G::is_static || H::extent % G::extent == 0,
                "attn::grad::fused_attention: the query heads must be a multiple of the key/value heads");
  check_common_extents("attn::grad::fused_attention", q.extents(), k.extents());
  check_common_extents("attn::grad::fused_attention", k.extents(), v.extents());
  detail::check_masks(q.extents(), k.extents(), visible, bias);
  fused_attention_problem p;
  p.batch = q.extents().template extent<B>();
  p.heads = q.extents().template extent<H>();
  p.kv_heads = k.extents().template extent<G>();
  p.queries = q.extents().template extent<Q>();
  p.keys = k.extents().template extent<K>();
  p.d_k = q.extents().template extent<DK>();
  p.d_v = v.extents().template extent<DV>();
  using out_shape = shape<B, H, Q, DV>;
  return detail::fused_attention_of(t, p, gather_extents<out_shape>(q.extents(), v.extents()),
                                    gather_extents<shape<B, H, Q, K>>(q.extents(), k.extents()), q, k, v, visible,
                                    scale, bias, rule, modification, dropout, backward);
}

/// How many query heads and key/value heads a layer's rows hold (fused_attention_in_rows).
struct row_heads {
  index_t heads, kv_heads;
};

namespace detail {
/// Keys, or K where Keys is void.
template <class Keys, class K>
using named_or = std::conditional_t<std::is_void_v<Keys>, K, Keys>;
}  // namespace detail

/// fused_attention over the heads as the model's projections lay them out, side by side in each
/// row (paper §3.2.2): q [B, Q, QW] with QW = H·d_k, k [B, K, KW] with KW = G·d_k, v [B, K, VW]
/// with VW = G·d_v, for `counts` of H query and G key/value heads; returns [B, Q, W], W = H·d_v,
/// the heads' outputs concatenated as the output projection reads them. The same numbers as
/// fused_attention on the heads split apart, without the permutes there and back (8 copies of
/// an attention's activations and gradients). H names the heads' axis of the scores a
/// modification sees, [B, H, Q, Keys], and Keys their keys' axis and the bias's (K when void:
/// nn's masks and modifications name it `keys` whatever the memory's length is called).
template <class H, class W, class Keys = void, class T, class B, class Q, class QW, class K, class KW, class VW,
          class Device, class Rule = every_pair, class Modification = unmodified>
variable<T, shape<B, Q, W>, Device> fused_attention_in_rows(
    tape* t, row_heads counts, const variable<T, shape<B, Q, QW>, Device>& q,
    const variable<T, shape<B, K, KW>, Device>& k, const variable<T, shape<B, K, VW>, Device>& v,
    const key_visibility<B, Device>& visible, std::type_identity_t<accumulate_t<T>> scale,
    std::type_identity_t<const tensor<T, shape<B, Q, detail::named_or<Keys, K>>, Device>*> bias = nullptr,
    Rule rule = {},
    const Modification& modification = {}, weight_dropout dropout = {},
    fused_backward backward = fused_backward::fastest) {
  using key_axis = detail::named_or<Keys, K>;
  static_assert(!K::is_static || !key_axis::is_static || K::extent == key_axis::extent,
                "attn::grad::fused_attention_in_rows: the keys' axis has another extent than the keys'");
  // Q and K may be one dimension of two extents (a memory named as the queries' length): the
  // batch alone is theirs to share.
  if (q.extents().template extent<B>() != k.extents().template extent<B>())
    throw extent_error("attn::grad::fused_attention_in_rows", "batch", q.extents().template extent<B>(),
                       k.extents().template extent<B>());
  check_common_extents("attn::grad::fused_attention_in_rows", k.extents(), v.extents());
  const auto keys =
      extents<shape<B, key_axis>>::from_array({k.extents().template extent<B>(), k.extents().template extent<K>()});
  detail::check_masks(q.extents(), keys, visible, bias);
  const auto widths = [&](index_t width, index_t heads, const char* name) {
    if (heads <= 0 || width % heads != 0)
      throw extent_error("attn::grad::fused_attention_in_rows", name,
                         std::to_string(width) + " columns do not split into " + std::to_string(heads) + " heads");
    return width / heads;
  };
  fused_attention_problem p;
  p.heads_in_rows = true;
  p.batch = q.extents().template extent<B>();
  p.heads = counts.heads;
  p.kv_heads = counts.kv_heads;
  p.queries = q.extents().template extent<Q>();
  p.keys = k.extents().template extent<K>();
  p.d_k = widths(q.extents().template extent<QW>(), p.heads, "queries' width");
  const index_t key_width = widths(k.extents().template extent<KW>(), p.kv_heads, "keys' width");
  if (key_width != p.d_k)
    throw extent_error("attn::grad::fused_attention_in_rows", "keys' width",
                       std::to_string(k.extents().template extent<KW>()) + " columns make " +
                           std::to_string(p.kv_heads) + " key heads of " + std::to_string(key_width) +
                           ", not of the queries' " + std::to_string(p.d_k));
  p.d_v = widths(v.extents().template extent<VW>(), p.kv_heads, "values' width");
  if (H::is_static && H::extent != p.heads)
    throw extent_error("attn::grad::fused_attention_in_rows", "heads",
                       std::to_string(p.heads) + " heads, but their axis holds " + std::to_string(H::extent));
  if (W::is_static && W::extent != p.heads * p.d_v)
    throw extent_error("attn::grad::fused_attention_in_rows", "output width",
                       std::to_string(p.heads) + " heads of " + std::to_string(p.d_v) + " columns, not " +
                           std::to_string(W::extent));
  const auto out = extents<shape<B, Q, W>>::from_array({p.batch, p.queries, p.heads * p.d_v});
  const auto scores = extents<shape<B, H, Q, key_axis>>::from_array({p.batch, p.heads, p.queries, p.keys});
  return detail::fused_attention_of(t, p, out, scores, q, k, v, visible, scale, bias, rule, modification, dropout,
                                    backward);
}

}  // namespace attn::grad
