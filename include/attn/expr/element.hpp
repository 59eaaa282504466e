// One element of an elementwise expression, computed alone at its coordinates: what a fused
// kernel needs to apply a variant's score modification to the one score it holds, inside its
// loop over a tile, instead of to a [queries, keys] tensor. A `placeholder` leaf stands for that
// score: its value is given at evaluation. Coordinates are one index a dimension of the
// expression's shape, so broadcasts, permutes and slices only pick and shift indices (no
// division); reshapes go through the row-major offset.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>

#include "broadcast.hpp"
#include "derivative.hpp"
#include "elementwise.hpp"
#include "iota.hpp"
#include "layout.hpp"
#include "slice.hpp"

namespace attn {

namespace expr {

/// A leaf whose every element is given when one element is evaluated (element_at's `given`):
/// the score a kernel holds, standing in for the [batch, heads, queries, keys] scores.
template <element T, shape_type S, device Device>
struct placeholder {
  using value_type = T;
  using shape_type = S;
  using device_type = Device;

  attn::extents<S> sizes;

  const attn::extents<S>& extents() const { return sizes; }
  template <class F>
  void for_each_child(F&&) const {}
};

}  // namespace expr

/// A placeholder of shape S with the given sizes.
template <element T, device Device = cpu, shape_type S>
auto placeholder(const extents<S>& sizes) {
  return expr::placeholder<T, S, Device>{sizes};
}

/// Coordinates of one element of a shape S: an index a dimension, in S's order.
template <shape_type S>
using coordinates = std::array<index_t, S::rank>;

namespace detail {

template <std::size_t I, class T, class S, class Device>
struct derivative_rule<I, expr::placeholder<T, S, Device>> {
  static expr::zero of(const expr::placeholder<T, S, Device>&) { return {}; }
};

template <std::size_t I, class E>
inline constexpr bool is_input = false;
template <std::size_t I, class A>
inline constexpr bool is_input<I, expr::input<I, A>> = true;

/// The row-major offset of coordinates c in a shape of the given sizes.
template <class S>
index_t row_major_offset(const coordinates<S>& c, const extents<S>& sizes) {
  index_t offset = 0;
  for (std::size_t r = 0; r < S::rank; ++r) offset = offset * sizes[r] + c[r];
  return offset;
}

/// The coordinates of row-major offset `offset` in a shape of the given sizes.
template <class S>
coordinates<S> from_row_major(index_t offset, const extents<S>& sizes) {
  coordinates<S> c{};
  for (std::size_t r = S::rank; r-- > 0;) {
    c[r] = offset % sizes[r];
    offset /= sizes[r];
  }
  return c;
}

/// The coordinates in A's shape of the element that broadcast, permute, reshape or slice node
/// E reads at coordinates c of its own shape.
template <class E>
auto operand_coordinates(const E& e, const coordinates<typename E::shape_type>& c) {
  using A = std::remove_cvref_t<decltype(e.a)>;
  using SA = typename A::shape_type;
  using S = typename E::shape_type;
  coordinates<SA> in{};
  if constexpr (requires { e.start; }) {  // slice: the same dimensions, one shifted
    in = c;
    in[dim_index<S, typename E::sliced_dim>] += e.start;
  } else if constexpr (requires { E::source_positions(); }) {  // permute
    constexpr auto from = E::source_positions();
    for (std::size_t r = 0; r < S::rank; ++r) in[from[r]] = c[r];
  } else if constexpr (std::is_same_v<E, expr::broadcast<S, A>>) {  // A's dimensions keep their indices
    [&]<class... Ds>(meta::list<Ds...>) {
      std::size_t r = 0;
      ((in[r++] = c[dim_index<S, Ds>]), ...);
    }(typename SA::dims{});
  } else {  // reshape: the same row-major offset
    in = from_row_major<SA>(row_major_offset<S>(c, e.extents()), e.a.extents());
  }
  return in;
}

}  // namespace detail

/// The element of elementwise expression e at coordinates c, computed alone on the host; every
/// placeholder in e reads `given`. Views are read in place (their data must be host memory).
/// Computed, and returned, in accumulate_t of e's value type, as the backends compute e (float
/// over 16-bit storage; a cast to a 16-bit type rounds there).
template <expression E, class Given = accumulate_t<value_t<E>>>
accumulate_t<value_t<E>> element_at(const E& e, const coordinates<shape_t<E>>& c, Given given = {}) {
  using result = accumulate_t<value_t<E>>;
  if constexpr (is_tensor_view_v<E>) {
    return result(e.data()[detail::row_major_offset<shape_t<E>>(c, e.extents())]);
  } else if constexpr (requires { typename E::contracted_dim; } || requires { typename E::reduced_dim; }) {
    static_assert(sizeof(E) == 0,
                  "attn::element_at: a reduction or contraction has no element of its own; evaluate it first");
  } else if constexpr (requires { e.condition; }) {
    return element_at(e.condition, c, given) ? element_at(e.a, c, given) : element_at(e.b, c, given);
  } else if constexpr (requires { e.a; e.b; }) {
    return e.op(element_at(e.a, c, given), element_at(e.b, c, given));
  } else if constexpr (requires { e.op; e.a; }) {
    return result(e.op(element_at(e.a, c, given)));  // a cast to a 16-bit type rounds, then widens
  } else if constexpr (requires { e.a; }) {
    if constexpr (std::is_same_v<shape_t<decltype(e.a)>, shape_t<E>> && !requires { e.start; })
      return element_at(e.a, c, given);  // input<I>, a rename or a same-shape reshape
    else
      return element_at(e.a, detail::operand_coordinates(e, c), given);
  } else if constexpr (requires { e.value; }) {
    return e.value;  // a constant
  } else if constexpr (requires { e.start; }) {
    return e.start + result(c[0]);  // an iota
  } else {
    static_assert(std::is_same_v<E, expr::placeholder<value_t<E>, shape_t<E>, device_t<E>>>,
                  "attn::element_at: an expression node it does not know");
    return result(given);
  }
}

/// The row-major offset, in input I's own shape, of the element of input I that e's element
/// at coordinates c reads; −1 when e does not read input I. (Elementwise expressions read an
/// input at one element an element, which is what derivative<I> assumes too.)
template <std::size_t I, expression E>
index_t input_offset(const E& e, const coordinates<shape_t<E>>& c) {
  if constexpr (detail::is_input<I, E>) {
    return detail::row_major_offset<shape_t<E>>(c, e.extents());
  } else if constexpr (requires { e.condition; }) {
    for (const index_t offset : {input_offset<I>(e.condition, c), input_offset<I>(e.a, c), input_offset<I>(e.b, c)})
      if (offset >= 0) return offset;
    return -1;
  } else if constexpr (requires { e.a; e.b; }) {
    const index_t offset = input_offset<I>(e.a, c);
    return offset >= 0 ? offset : input_offset<I>(e.b, c);
  } else if constexpr (requires { e.op; e.a; }) {
    return input_offset<I>(e.a, c);
  } else if constexpr (requires { e.a; } && !is_tensor_view_v<E>) {
    if constexpr (std::is_same_v<shape_t<decltype(e.a)>, shape_t<E>> && !requires { e.start; })
      return input_offset<I>(e.a, c);
    else
      return input_offset<I>(e.a, detail::operand_coordinates(e, c));
  } else {
    return -1;  // a leaf
  }
}

namespace detail {

template <class E, class... Dims>
inline constexpr bool is_iota_along = false;
template <class T, class D, class Device, class... Dims>
inline constexpr bool is_iota_along<expr::iota<T, D, Device>, Dims...> = (std::is_same_v<D, Dims> || ...);

}  // namespace detail

/// Whether elementwise expression E is computed from its coordinates along Dims alone: its
/// leaves are constants and iotas along Dims (attn::index_along), so that it reads no memory, no
/// placeholder, and no other coordinate. A fused attention mask rule given as an expression
/// (grad::pair_rule) must be, over the queries and the keys: it then holds for every sentence
/// and head.
template <class E, class... Dims>
inline constexpr bool computed_from = [] {
  if constexpr (is_tensor_view_v<E> || requires { typename E::contracted_dim; } ||
                requires { typename E::reduced_dim; }) {
    return false;
  } else if constexpr (requires(const E& e) { e.a; }) {
    bool from = computed_from<std::remove_cvref_t<decltype(std::declval<const E&>().a)>, Dims...>;
    if constexpr (requires(const E& e) { e.b; })
      from = from && computed_from<std::remove_cvref_t<decltype(std::declval<const E&>().b)>, Dims...>;
    if constexpr (requires(const E& e) { e.condition; })
      from = from && computed_from<std::remove_cvref_t<decltype(std::declval<const E&>().condition)>, Dims...>;
    return from;
  } else if constexpr (requires(const E& e) { e.value; }) {
    return true;  // a constant
  } else {
    return detail::is_iota_along<E, Dims...>;  // else a placeholder
  }
}();

}  // namespace attn
