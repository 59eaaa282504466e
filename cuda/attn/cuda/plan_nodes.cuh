// The plans of the nodes that read their operands where they stand (constants, placeholders,
// unary and binary operations, selects): called with the node's `where` (elementwise.cuh's
// row-major index, coordinate_plan.cuh's coordinates) and pass it on unchanged, so both plan
// families share them. Trivially copyable, and naming no dimension (elementwise.cuh says why).
// No CUDA run-time here: the CPU emulator's tests compile them too.
#pragma once

#include <type_traits>
#include <utility>

#include <attn/core.hpp>

namespace attn::cuda_backend {

template <class T>
struct constant_plan {
  using value_type = T;
  T value;
  template <class Where, class... Given>
  __device__ T operator()(const Where&, Given...) const { return value; }
};

/// A placeholder (expr/element.hpp): the value given to the evaluation, the score a fused
/// attention kernel holds. Plans without one are evaluated with nothing given.
template <class T>
struct placeholder_plan {
  using value_type = accumulate_t<T>;
  template <class Where, class Given>
  __device__ value_type operator()(const Where&, Given given) const { return value_type(given); }
};

// The scalar functors of expr/ops.hpp are stateless: plans call a fresh Op{} rather than store
// one. A cast to a 16-bit type rounds there and widens again.
template <class Op, class A>
struct unary_plan {
  using value_type = accumulate_t<decltype(Op{}(std::declval<typename A::value_type>()))>;
  A a;
  template <class Where, class... Given>
  __device__ value_type operator()(const Where& at, Given... given) const { return value_type(Op{}(a(at, given...))); }
};

template <class Op, class A, class B>
struct binary_plan {
  using value_type =
      decltype(Op{}(std::declval<typename A::value_type>(), std::declval<typename B::value_type>()));
  A a;
  B b;
  template <class Where, class... Given>
  __device__ value_type operator()(const Where& at, Given... given) const {
    return Op{}(a(at, given...), b(at, given...));
  }
};

/// Only the chosen branch is evaluated: a masked log or division never runs where masked. (The
/// vector kernel evaluates both for a run of floating-point elements, elementwise_vectors.cuh.)
template <class C, class A, class B>
struct select_plan {
  using value_type = typename A::value_type;
  C condition;
  A a;
  B b;
  template <class Where, class... Given>
  __device__ value_type operator()(const Where& at, Given... given) const {
    return condition(at, given...) ? a(at, given...) : b(at, given...);
  }
};

}  // namespace attn::cuda_backend
