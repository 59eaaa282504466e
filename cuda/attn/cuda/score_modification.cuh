// The device form of a variant's score modification (grad/fused_attention.hpp's
// evaluated_modification), which the fused attention kernels evaluate a score at a time. On the
// host, expr/element.hpp's element_at walks the expression by coordinates; here the expression
// becomes coordinate plans (coordinate_plan.cuh) evaluated at the score's coordinates (b, h, i, j)
// in [batch, heads, queries, keys], the score given to the placeholder, and input_offset
// becomes an index plan: the offset in a learned input's own shape of the element a score reads.
// Everything here is trivially copyable: the whole modification is one kernel parameter. No CUDA
// run-time here either: the plans read the expression's views where they are, and the CPU
// emulator's tests build device forms from host expressions.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <attn/expr.hpp>

#include "coordinate_plan.cuh"
#include "fused_attention_masks.cuh"  // no_score_modification, score_position
#include "plan_cost.cuh"

namespace attn::cuda_backend {

/// What a kernel does with one input's gradient: nothing (a constant input, or one whose
/// gradient nobody wants), or add d_score · ∂modification/∂input at the element the score read:
/// at once (`add`), or summed in `held` over scores that read the same element (`hold`), then
/// added there (`add_held`). `hold` adds 0 where `counted` is false, whatever the partial is
/// there (it may be ∞ or NaN where dS is 0): a select, for a kernel that takes every score
/// without a branch.
struct no_input_gradient {
  static constexpr bool along_keys = false;
  template <class At, class A>
  __device__ void add(At, A, A, A*) const {}
  template <class At, class A>
  __device__ void hold(At, A, A, bool, A&) const {}
  template <class At, class A>
  __device__ void add_held(At, A, A*) const {}
};
template <class Partial, class Index>
struct input_gradient {
  /// Whether the element a score reads changes with the score's key.
  static constexpr bool along_keys = (coordinates_read<Index> >> 3 & 1u) != 0;
  Partial partial;  // the plan of ∂modification/∂input
  Index index;      // the plan of the element's index in the input
  index_t offset;   // of the input's gradient among the others; −1: not wanted
  template <class At, class A>
  __device__ void add(At at, A s, A d_score, A* gradients) const {
    if (offset >= 0) gradients[offset + index_t(index(at))] += d_score * A(partial(at, s));
  }
  template <class At, class A>
  __device__ void hold(At at, A s, A d_score, bool counted, A& held) const {
    // The select of the sum, not of the share: the sum's multiply and add stay one fused
    // multiply-add (nvcc's PTX for sm_90), as where a branch guards them.
    if (offset >= 0) held = counted ? held + d_score * A(partial(at, s)) : held;
  }
  template <class At, class A>
  __device__ void add_held(At at, A held, A* gradients) const {
    if (offset >= 0) gradients[offset + index_t(index(at))] += held;
  }
};

/// A list of trivially copyable members (std::tuple's assignment is user-provided, so a tuple
/// is not trivially copyable, and cannot be a kernel parameter).
template <class... Ts>
struct plan_list {};
template <class T, class... Ts>
struct plan_list<T, Ts...> {
  T first;
  plan_list<Ts...> rest;
};

template <class At, class A, class... Ts>
__device__ void add_each(const plan_list<Ts...>& list, At at, A s, A d_score, A* gradients) {
  if constexpr (sizeof...(Ts) > 0) {
    list.first.add(at, s, d_score, gradients);
    add_each(list.rest, at, s, d_score, gradients);
  }
}
template <class At, class A, class... Ts>
__device__ void hold_each(const plan_list<Ts...>& list, At at, A s, A d_score, bool counted, A* held) {
  if constexpr (sizeof...(Ts) > 0) {
    list.first.hold(at, s, d_score, counted, held[0]);
    hold_each(list.rest, at, s, d_score, counted, held + 1);
  }
}
template <class At, class A, class... Ts>
__device__ void add_each_held(const plan_list<Ts...>& list, At at, const A* held, A* gradients) {
  if constexpr (sizeof...(Ts) > 0) {
    list.first.add_held(at, held[0], gradients);
    add_each_held(list.rest, at, held + 1, gradients);
  }
}
template <class... Ts>
inline constexpr bool any_along_keys(const plan_list<Ts...>*) {
  return (false || ... || Ts::along_keys);
}
template <class... Ts>
inline constexpr int count_of(const plan_list<Ts...>*) {
  return int(sizeof...(Ts));
}

template <>
inline constexpr int plan_cost<no_input_gradient> = 0;
template <class Partial, class Index>
inline constexpr int plan_cost<input_gradient<Partial, Index>> = 3 + plan_cost<Partial> + plan_cost<Index>;
template <class... Ts>
inline constexpr int plan_cost<plan_list<Ts...>> = (0 + ... + plan_cost<Ts>);

/// A modification on the device: the modified score, its derivative by the score, and each
/// learned input's gradient, at the score's coordinates (b, h, i, j) in [batch, heads, queries,
/// keys] (score_position). The plans read their leaves at offsets multiplied out of these
/// coordinates in 64 bits: no division but a reshape's (a 32-bit index would save little, and
/// its conversions cost as much: bench/score_modification_sass.sh).
template <class Score, class Slope, class Inputs>
struct device_score_modification {
  static constexpr bool modifies = true;
  /// What the score, its derivative and the inputs' gradients cost together (plan_cost.cuh).
  static constexpr int cost = plan_cost<Score> + plan_cost<Slope> + plan_cost<Inputs>;
  Score score;
  Slope slope;    // expr::zero's plan: none (a constant shift has derivative 1: still a plan)
  Inputs inputs;  // plan_list of input_gradient or no_input_gradient, one an input
  index_t size;   // how many numbers the inputs' gradients take

  template <class A>
  __device__ A operator()(const score_position& at, A s) const {
    return A(score(at, s));
  }
  template <class A>
  __device__ A derivative(const score_position& at, A s) const {
    if constexpr (std::is_same_v<Slope, no_input_gradient>) return A(0);
    else return A(slope(at, s));
  }
  /// Adds d_score · ∂modification/∂input to each wanted input's gradient, in `gradients`.
  template <class A>
  __device__ void accumulate(const score_position& at, A s, A d_score, A* gradients) const {
    add_each(inputs, at, s, d_score, gradients);
  }

  /// The inputs, each with a number in `held` below.
  static constexpr int input_count = count_of(static_cast<const Inputs*>(nullptr));
  /// Whether each input's element that a score reads is the same along a query's keys (ALiBi's
  /// slope a head): a kernel may then sum a query's shares of each input's gradient in `held`
  /// (input_count numbers, zeros at first; hold at each score) and add them to `gradients` once
  /// (add_held, at any of the query's scores), rather than at every score (accumulate); a score
  /// not `counted` adds 0.
  static constexpr bool holds_along_keys = !any_along_keys(static_cast<const Inputs*>(nullptr));
  template <class A>
  __device__ void hold(const score_position& at, A s, A d_score, bool counted, A* held) const {
    hold_each(inputs, at, s, d_score, counted, held);
  }
  template <class A>
  __device__ void add_held(const score_position& at, const A* held, A* gradients) const {
    add_each_held(inputs, at, held, gradients);
  }
};

namespace detail {

template <class E>
auto plan_or_nothing(const E& e) {
  if constexpr (attn::detail::is_zero<E>) return no_input_gradient{};
  else return coordinate_plan(e);
}

template <std::size_t K, class M>
auto input_gradient_of(const M& m) {
  const auto& partial = std::get<K>(m.partials);
  using P = std::remove_cvref_t<decltype(partial)>;
  if constexpr (attn::detail::is_zero<P>) {
    return no_input_gradient{};
  } else {
    auto index = index_plan<K + 1>(m.score);  // input K + 1: input 0 is the score
    auto plan = coordinate_plan(partial);
    return input_gradient<decltype(plan), decltype(index)>{plan, index, m.offsets[K]};
  }
}

inline plan_list<> list_of() { return {}; }
template <class T, class... Ts>
plan_list<T, Ts...> list_of(const T& first, const Ts&... rest) {
  return {first, list_of(rest...)};
}

template <class M, std::size_t... K>
auto to_device(const M& m, std::index_sequence<K...>) {
  auto score = coordinate_plan(m.score);
  auto slope = plan_or_nothing(m.slope);
  auto inputs = list_of(input_gradient_of<K>(m)...);
  return device_score_modification<decltype(score), decltype(slope), decltype(inputs)>{score, slope, inputs,
                                                                                       m.gradient_size()};
}

}  // namespace detail

/// The device form of a modification: unmodified stays unmodified; an evaluated modification
/// (grad/fused_attention.hpp) becomes plans, which read its views where they are (device
/// memory for the GPU's kernels; the emulator's, host memory).
inline no_score_modification device_modification(const unmodified&) { return {}; }
template <class M>
auto device_modification(const M& m) {
  using partials = std::remove_cvref_t<decltype(m.partials)>;
  auto d = detail::to_device(m, std::make_index_sequence<std::tuple_size_v<partials>>{});
  static_assert(std::is_trivially_copyable_v<decltype(d)>,
                "attn::cuda: a score modification's plans must be trivially copyable to be a kernel parameter");
  return d;
}

}  // namespace attn::cuda_backend
