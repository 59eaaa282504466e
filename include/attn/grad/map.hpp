// Differentiable elementwise functions written as expressions: y = f(x₀, x₁, …), and the
// gradient of each input dy ⊙ ∂f/∂xᵢ, the derivative read off f's expression
// (expr/derivative.hpp) and summed over the dimensions along which f broadcast the input. An
// attention variant's score modification gets its backward pass so, without a rule of its own.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../expr/derivative.hpp"
#include "../expr/reduce.hpp"
#include "variable.hpp"

namespace attn::grad {

namespace detail {

/// The first dimension of the list that shape To lacks (void if none).
template <class To, class List>
struct first_absent {
  using type = void;
};
template <class To, class D, class... Rest>
struct first_absent<To, meta::list<D, Rest...>> {
  using type = std::conditional_t<has_dim<To, D>, typename first_absent<To, meta::list<Rest...>>::type, D>;
};

/// g summed over the dimensions that To lacks: the gradient of an operand broadcast to g's shape.
template <shape_type To, class T, class S, class Device>
tensor<T, To, Device> sum_to(tensor<T, S, Device> g) {
  using D = typename first_absent<To, typename S::dims>::type;
  if constexpr (std::is_void_v<D>) {
    static_assert(std::is_same_v<S, To>,
                  "attn::grad::map: an input reaches the result other than by broadcast (its dimensions "
                  "reordered); permute it outside the function");
    return g;
  } else {
    return sum_to<To>(tensor<T, remove_dim<S, D>, Device>(sum<D>(g)));
  }
}

/// Adds dy ⊙ ∂f/∂x_K to input K's gradient.
template <std::size_t K, class F, class Y, std::size_t... I, class... V>
void pull_back(const F& f, const Y& y, std::index_sequence<I...>, const V&... xs) {
  const auto& x = std::get<K>(std::forward_as_tuple(xs...));
  if (!x.requires_grad()) return;
  const auto partial = derivative<K>(f(input<I>(xs.value())...));
  if constexpr (!attn::detail::is_zero<decltype(partial)>) {
    using X = std::remove_cvref_t<decltype(x)>;
    typename Y::tensor_type g(y.grad() * partial);
    x.accumulate(sum_to<typename X::shape_type>(std::move(g)));
  }
}

template <class F, std::size_t... I, class... V>
auto map_inputs(tape* t, const F& f, std::index_sequence<I...> inputs, const V&... xs) {
  using E = decltype(f(input<I>(xs.value())...));
  static_assert(expression<E>, "attn::grad::map: f must return an expression of its arguments");
  variable<value_t<E>, shape_t<E>, device_t<E>> y(f(input<I>(xs.value())...), recording(t, xs...));
  if (y.requires_grad()) {
    t->record([f, y = y.without_value(), inputs, xs...] {
      if (y.has_grad()) (pull_back<I>(f, y, inputs, xs...), ...);
    });
  }
  return y;
}

}  // namespace detail

/// y = f(x₀, x₁, …) for f written in elementwise expressions of its arguments (which it may
/// broadcast, slice and combine with constants and coordinates, attn::index_along). f is
/// called with the inputs' values marked as inputs 0, 1, …, and called again in the
/// backward pass to differentiate it: it must be a pure function of its arguments.
template <class F, class... V>
auto map(tape* t, const F& f, const V&... xs) {
  return detail::map_inputs(t, f, std::index_sequence_for<V...>{}, xs...);
}

}  // namespace attn::grad
