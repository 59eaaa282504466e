// The device form of a variant's score modification (grad/fused_attention.hpp's
// evaluated_modification), which the fused attention kernels evaluate a score at a time. On the
// host, expr/element.hpp's element_at walks the expression by coordinates; here the expression
// becomes this backend's plans (elementwise.cuh), evaluated at the score's row-major index in
// [batch, heads, queries, keys] with the score given to the placeholder, and input_offset
// becomes an index plan: the index in a learned input's own shape of the element a score reads.
// Everything here is trivially copyable: the whole modification is one kernel parameter.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#include <attn/expr.hpp>

#include "elementwise.cuh"
#include "fused_attention_masks.cuh"  // no_score_modification

namespace attn::cuda_backend {

/// Whether expression E reads input I (expr/derivative.hpp's marked inputs).
template <std::size_t I, class E>
inline constexpr bool reads_input = [] {
  if constexpr (attn::detail::is_input<I, E>) {
    return true;
  } else if constexpr (is_tensor_view_v<E>) {
    return false;
  } else {
    bool reads = false;
    if constexpr (requires(const E& e) { e.condition; })
      reads = reads || reads_input<I, std::remove_cvref_t<decltype(std::declval<const E&>().condition)>>;
    if constexpr (requires(const E& e) { e.a; })
      reads = reads || reads_input<I, std::remove_cvref_t<decltype(std::declval<const E&>().a)>>;
    if constexpr (requires(const E& e) { e.b; })
      reads = reads || reads_input<I, std::remove_cvref_t<decltype(std::declval<const E&>().b)>>;
    return reads;
  }
}();

/// Index plans: from a node's linear index to the linear index, in input I's own shape, of the
/// element of input I that the node's element reads (host input_offset's device form).
struct input_index_plan {
  template <class Index>
  __device__ Index operator()(Index i) const { return i; }
};

/// A broadcast, a permute or a slice on the way to the input: its map, then the operand's plan.
template <class Map, class A>
struct mapped_index_plan {
  A a;
  Map map;
  template <class Index>
  __device__ Index operator()(Index i) const { return a(map(i)); }
};

/// index_planner<I, E>::make(e): the index plan of input I through node E, which reads it. Like
/// input_offset, through the first operand that reads it (condition, a, b).
template <std::size_t I, class E>
struct index_planner {
  static auto make(const E& e) {
    if constexpr (attn::detail::is_input<I, E>) {
      return input_index_plan{};
    } else if constexpr (requires { e.condition; }) {
      if constexpr (reads_input<I, std::remove_cvref_t<decltype(e.condition)>>) return of(e.condition);
      else if constexpr (reads_input<I, std::remove_cvref_t<decltype(e.a)>>) return of(e.a);
      else return of(e.b);
    } else if constexpr (requires { e.a; e.b; }) {
      if constexpr (reads_input<I, std::remove_cvref_t<decltype(e.a)>>) return of(e.a);
      else return of(e.b);
    } else {
      return of(e.a);  // unary, reshape, another input: the same linear index
    }
  }
  template <class A>
  static auto of(const A& a) {
    return index_planner<I, A>::make(a);
  }
};
template <std::size_t I, class To, class A>
struct index_planner<I, expr::broadcast<To, A>> {
  static auto make(const expr::broadcast<To, A>& e) {
    using plan = decltype(index_planner<I, A>::make(e.a));
    return mapped_index_plan<index_map<To::rank>, plan>{index_planner<I, A>::make(e.a), detail::gather_map(e)};
  }
};
template <std::size_t I, class To, class A>
struct index_planner<I, expr::permute<To, A>> {
  static auto make(const expr::permute<To, A>& e) {
    using plan = decltype(index_planner<I, A>::make(e.a));
    return mapped_index_plan<index_map<To::rank>, plan>{index_planner<I, A>::make(e.a), detail::gather_map(e)};
  }
};
template <std::size_t I, class D, class A>
struct index_planner<I, expr::slice<D, A>> {
  static auto make(const expr::slice<D, A>& e) {
    using plan = decltype(index_planner<I, A>::make(e.a));
    return mapped_index_plan<slice_map, plan>{index_planner<I, A>::make(e.a), detail::slice_map_of(e)};
  }
};

/// What a kernel does with one input's gradient: nothing (a constant input, or one whose
/// gradient nobody wants), or add d_score · ∂modification/∂input at the element the score read.
struct no_input_gradient {
  template <class At, class A>
  __device__ void add(At, A, A, A*) const {}
};
template <class Partial, class Index>
struct input_gradient {
  Partial partial;  // the plan of ∂modification/∂input
  Index index;      // the plan of the element's index in the input
  index_t offset;   // of the input's gradient among the others; −1: not wanted
  template <class At, class A>
  __device__ void add(At at, A s, A d_score, A* gradients) const {
    if (offset >= 0) gradients[offset + index_t(index(at))] += d_score * A(partial(at, s));
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

/// A modification on the device: the modified score, its derivative by the score, and each
/// learned input's gradient, at the score's row-major index `at` in [batch, heads, queries, keys]
/// (std::int64_t: 64-bit indices, the sizes of every score at once). The plans take `at` apart
/// in 32 bits where every score's index fits (`narrow`): a multiply where 64 bits divide
/// (fast_divider.cuh), at every score.
template <class Score, class Slope, class Inputs>
struct device_score_modification {
  static constexpr bool modifies = true;
  Score score;
  Slope slope;    // expr::zero's plan: none (a constant shift has derivative 1: still a plan)
  Inputs inputs;  // plan_list of input_gradient or no_input_gradient, one an input
  index_t size;   // how many numbers the inputs' gradients take
  bool narrow;    // every score's index < 2³¹

  template <class A>
  __device__ A operator()(std::int64_t at, A s) const {
    return narrow ? A(score(std::uint32_t(at), s)) : A(score(at, s));
  }
  template <class A>
  __device__ A derivative(std::int64_t at, A s) const {
    if constexpr (std::is_same_v<Slope, no_input_gradient>) return A(0);
    else return narrow ? A(slope(std::uint32_t(at), s)) : A(slope(at, s));
  }
  /// Adds d_score · ∂modification/∂input to each wanted input's gradient, in `gradients`.
  template <class A>
  __device__ void accumulate(std::int64_t at, A s, A d_score, A* gradients) const {
    if (narrow) add_each(inputs, std::uint32_t(at), s, d_score, gradients);
    else add_each(inputs, at, s, d_score, gradients);
  }
};

namespace detail {

template <class E>
auto plan_or_nothing(const E& e, workspace& ws) {
  if constexpr (attn::detail::is_zero<E>) return no_input_gradient{};
  else return make_plan(e, ws);
}

template <std::size_t K, class M>
auto input_gradient_of(const M& m, workspace& ws) {
  const auto& partial = std::get<K>(m.partials);
  using P = std::remove_cvref_t<decltype(partial)>;
  if constexpr (attn::detail::is_zero<P>) {
    return no_input_gradient{};
  } else {
    using S = std::remove_cvref_t<decltype(m.score)>;
    auto index = index_planner<K + 1, S>::make(m.score);  // input K + 1: input 0 is the score
    return input_gradient<plan_t<P>, decltype(index)>{make_plan(partial, ws), index, m.offsets[K]};
  }
}

inline plan_list<> list_of() { return {}; }
template <class T, class... Ts>
plan_list<T, Ts...> list_of(const T& first, const Ts&... rest) {
  return {first, list_of(rest...)};
}

template <class M, std::size_t... K>
auto to_device(const M& m, workspace& ws, std::index_sequence<K...>) {
  auto score = make_plan(m.score, ws);
  auto slope = plan_or_nothing(m.slope, ws);
  auto inputs = list_of(input_gradient_of<K>(m, ws)...);
  const bool narrow = largest_size(m.score) <= std::numeric_limits<std::int32_t>::max();
  return device_score_modification<decltype(score), decltype(slope), decltype(inputs)>{score, slope, inputs,
                                                                                       m.gradient_size(), narrow};
}

}  // namespace detail

/// The device form of a modification: unmodified stays unmodified; an evaluated modification
/// (grad/fused_attention.hpp) becomes plans, whose temporaries (none, for an elementwise
/// expression of views and coordinates) ws owns.
inline no_score_modification device_modification(const unmodified&, workspace&) { return {}; }
template <class M>
auto device_modification(const M& m, workspace& ws) {
  using partials = std::remove_cvref_t<decltype(m.partials)>;
  auto d = detail::to_device(m, ws, std::make_index_sequence<std::tuple_size_v<partials>>{});
  static_assert(std::is_trivially_copyable_v<decltype(d)>,
                "attn::cuda: a score modification's plans must be trivially copyable to be a kernel parameter");
  return d;
}

}  // namespace attn::cuda_backend
