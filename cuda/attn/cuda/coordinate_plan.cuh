// Plans evaluated at an element's coordinates: the device form of expr/element.hpp's element_at
// and input_offset, which a fused attention kernel's score modification evaluates at the score
// (b, h, i, j) it holds. The generated elementwise kernel's plans (elementwise.cuh) take a
// row-major linear index and divide it back into coordinates at every broadcast, permute and
// slice; a kernel that holds the coordinates already need not: here a broadcast or a permute
// picks coordinates, a slice shifts one, a rename passes them on, a leaf multiplies them by its
// strides. Only a split or a merge goes through the row-major offset, as element_at does.
// Operations, constants and placeholders are plan_nodes.cuh's, which both families share. No
// CUDA run-time here: the CPU emulator's tests build these plans from host expressions and run
// them in the kernels.
//
// Like elementwise.cuh's plans, these are trivially copyable (a whole tree is one kernel
// parameter) and their types name no dimension, only ranks and positions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <attn/expr.hpp>

#include "fast_divider.cuh"
#include "plan_nodes.cuh"
#include "position.cuh"

namespace attn::cuda_backend {

// Leaves (with plan_nodes.cuh's constant_plan and placeholder_plan).

/// A view: dense row-major data.
template <class T, std::size_t R>
struct data_at {
  using value_type = accumulate_t<T>;
  const T* data;
  offset_of<R> offset;
  template <class I, class... Given>
  __device__ value_type operator()(const position<R, I>& c, Given...) const {
    return value_type(data[offset(c)]);
  }
};

/// An iota: its one coordinate, shifted.
template <class T>
struct iota_at {
  using value_type = T;
  T start;
  template <class I, class... Given>
  __device__ T operator()(const position<1, I>& c, Given...) const { return start + static_cast<T>(c.index[0]); }
};

// Maps from a node's coordinates to its operand's.

/// Broadcast and permute: operand coordinate k is the node's coordinate From[k].
template <std::size_t... From>
struct pick {
  template <std::size_t R, class I>
  __device__ position<sizeof...(From), I> operator()(const position<R, I>& c) const {
    return {{c.index[From]...}};
  }
};

/// Slice: the same coordinates, the sliced one shifted by the slice's start.
template <std::size_t Dim>
struct shift {
  index_t start;
  template <std::size_t R, class I>
  __device__ position<R, I> operator()(position<R, I> c) const {
    c.index[Dim] += I(start);
    return c;
  }
};

/// Reshape (a split or a merge): the same row-major offset, taken apart in the operand's sizes.
/// A GPU has no integer divider: where the offsets fit 32 bits (`narrow`), it divides by
/// multiplying (fast_divider.cuh), else it calls 64-bit division (about a hundred instructions).
template <std::size_t R, std::size_t RA>
struct relayout {
  offset_of<R> offset;             // in the node
  index_t sizes[RA > 0 ? RA : 1];  // the operand's
  fast_divider dividers[RA > 0 ? RA : 1];
  bool narrow;  // the node's elements are fewer than 2³²
  template <class I>
  __device__ position<RA, I> operator()(const position<R, I>& c) const {
    position<RA, I> in{};
    if (narrow) {
      std::uint32_t rest = std::uint32_t(offset(c));
      for (std::size_t r = RA; r-- > 1;) {
        const std::uint32_t quotient = dividers[r].quotient(rest);
        in.index[r] = I(dividers[r].remainder(rest, quotient));
        rest = quotient;
      }
      if constexpr (RA > 0) in.index[0] = I(rest);
    } else {
      I rest = offset(c);
      for (std::size_t r = RA; r-- > 1;) {
        in.index[r] = rest % I(sizes[r]);
        rest /= I(sizes[r]);
      }
      if constexpr (RA > 0) in.index[0] = rest;
    }
    return in;
  }
};

/// A node that reads its operand through a map.
template <class Map, class A>
struct mapped_at {
  using value_type = typename A::value_type;
  Map map;
  A a;
  template <class C, class... Given>
  __device__ value_type operator()(const C& c, Given... given) const {
    return a(map(c), given...);
  }
};

namespace detail {

/// pick<From...> from a constexpr array of positions.
template <auto positions, std::size_t... K>
auto pick_of(std::index_sequence<K...>) {
  return pick<positions[K]...>{};
}

template <class E>
inline constexpr bool is_reshape = false;
template <class To, class A>
inline constexpr bool is_reshape<expr::reshape<To, A>> = true;

/// Whether node E reads its operand at its own coordinates: an input, a reshape to the same
/// shape, a rename (element_at's pass-through, and a reshape that keeps the rank: split and merge
/// change it; same_sizes checks the sizes).
template <class E>
inline constexpr bool passes_coordinates = [] {
  using A = std::remove_cvref_t<decltype(std::declval<const E&>().a)>;
  if constexpr (requires(const E& e) { e.start; }) return false;  // a slice
  else if constexpr (std::is_same_v<shape_t<A>, shape_t<E>>) return true;
  else return is_reshape<E> && shape_t<A>::rank == shape_t<E>::rank;
}();

/// A node that passes its coordinates on has its operand's sizes.
template <class E>
void same_sizes(const E& e) {
  for (std::size_t r = 0; r < shape_t<E>::rank; ++r)
    if (e.extents()[r] != e.a.extents()[r])
      throw std::invalid_argument("attn::cuda: a reshape that keeps its rank must keep its sizes");
}

/// The map of broadcast, permute, slice or reshape node E to its operand's coordinates
/// (element_at's operand_coordinates).
template <class E>
auto operand_map(const E& e) {
  using A = std::remove_cvref_t<decltype(e.a)>;
  using SA = shape_t<A>;
  using S = shape_t<E>;
  if constexpr (requires { e.start; }) {  // slice
    return shift<dim_index<S, typename E::sliced_dim>>{e.start};
  } else if constexpr (requires { E::source_positions(); }) {  // permute: in[from[r]] = c[r]
    static constexpr auto to = [] {
      constexpr auto from = E::source_positions();
      std::array<std::size_t, S::rank> inverse{};
      for (std::size_t r = 0; r < S::rank; ++r) inverse[from[r]] = r;
      return inverse;
    }();
    return pick_of<to>(std::make_index_sequence<S::rank>{});
  } else if constexpr (std::is_same_v<E, expr::broadcast<S, A>>) {  // A's dimensions keep their indices
    return []<class... Ds>(meta::list<Ds...>) { return pick<dim_index<S, Ds>...>{}; }(typename SA::dims{});
  } else {  // reshape
    relayout<S::rank, SA::rank> map{};
    map.offset = offset_of<S::rank>::in(e.extents());
    map.narrow = e.extents().size() <= index_t{0xffffffff};
    for (std::size_t r = 0; r < SA::rank; ++r) {
      map.sizes[r] = e.a.extents()[r];
      if (map.sizes[r] >= 1 && map.sizes[r] <= index_t{0xffffffff})
        map.dividers[r] = fast_divider(std::uint64_t(map.sizes[r]));
    }
    return map;
  }
}

}  // namespace detail

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

/// The plan of elementwise expression e evaluated at its coordinates, node for node as
/// element_at evaluates it (which takes no reduction or contraction either: a score
/// modification has none, derivative<I> refusing them).
template <class E>
auto coordinate_plan(const E& e) {
  using S = shape_t<E>;
  if constexpr (is_tensor_view_v<E>) {
    return data_at<std::remove_const_t<value_t<E>>, S::rank>{e.data(), offset_of<S::rank>::in(e.extents())};
  } else if constexpr (requires { typename E::contracted_dim; } || requires { typename E::reduced_dim; }) {
    static_assert(sizeof(E) == 0, "attn::cuda: a reduction or contraction has no element of its own");
  } else if constexpr (requires { e.condition; }) {
    using C = decltype(coordinate_plan(e.condition));
    using A = decltype(coordinate_plan(e.a));
    using B = decltype(coordinate_plan(e.b));
    return select_plan<C, A, B>{coordinate_plan(e.condition), coordinate_plan(e.a), coordinate_plan(e.b)};
  } else if constexpr (requires { e.a; e.b; }) {
    using A = decltype(coordinate_plan(e.a));
    using B = decltype(coordinate_plan(e.b));
    return binary_plan<std::remove_cvref_t<decltype(e.op)>, A, B>{coordinate_plan(e.a), coordinate_plan(e.b)};
  } else if constexpr (requires { e.op; e.a; }) {
    using A = decltype(coordinate_plan(e.a));
    return unary_plan<std::remove_cvref_t<decltype(e.op)>, A>{coordinate_plan(e.a)};
  } else if constexpr (requires { e.a; }) {
    if constexpr (detail::passes_coordinates<E>) {
      detail::same_sizes(e);
      return coordinate_plan(e.a);
    } else {
      const auto map = detail::operand_map(e);
      using A = decltype(coordinate_plan(e.a));
      return mapped_at<std::remove_const_t<decltype(map)>, A>{map, coordinate_plan(e.a)};
    }
  } else if constexpr (requires { e.value; }) {
    return constant_plan<accumulate_t<value_t<E>>>{e.value};
  } else if constexpr (requires { e.start; }) {
    return iota_at<accumulate_t<value_t<E>>>{e.start};
  } else {
    static_assert(std::is_same_v<E, expr::placeholder<value_t<E>, S, device_t<E>>>,
                  "attn::cuda: a score modification node with no coordinate plan");
    return placeholder_plan<value_t<E>>{};
  }
}

/// Which coordinates of the position it is given an index plan (index_plan, below) reads, as
/// bits (bit k: coordinate k): a kernel holding a score's (b, h, i, j) learns from it whether the
/// element of an input that a score reads changes along the keys j (bit 3). A reshape reads every
/// coordinate; a plan of a type not known here, every one too.
template <class P>
inline constexpr unsigned coordinates_read = ~0u;
template <std::size_t R>
inline constexpr unsigned coordinates_read<offset_of<R>> = (1u << R) - 1;
template <std::size_t Dim, class A>
inline constexpr unsigned coordinates_read<mapped_at<shift<Dim>, A>> = coordinates_read<A>;
template <std::size_t R, std::size_t RA, class A>
inline constexpr unsigned coordinates_read<mapped_at<relayout<R, RA>, A>> = coordinates_read<A> ? (1u << R) - 1 : 0;
/// A broadcast or a permute: the operand's coordinate k is the node's From[k].
template <std::size_t... From, class A>
inline constexpr unsigned coordinates_read<mapped_at<pick<From...>, A>> = [] {
  constexpr std::size_t from[] = {From..., 0};
  unsigned read = 0;
  for (std::size_t k = 0; k < sizeof...(From); ++k)
    if (coordinates_read<A> >> k & 1u) read |= 1u << from[k];
  return read;
}();

/// The index plan of input I through e, which reads it: at e's coordinates, the row-major
/// offset in input I's own shape of the element read, through the first operand that reads it
/// (input_offset's device form).
template <std::size_t I, class E>
auto index_plan(const E& e) {
  static_assert(reads_input<I, E>, "attn::cuda: an index plan of an input the expression does not read");
  if constexpr (attn::detail::is_input<I, E>) {
    return offset_of<shape_t<E>::rank>::in(e.extents());
  } else if constexpr (requires { e.condition; }) {
    if constexpr (reads_input<I, std::remove_cvref_t<decltype(e.condition)>>) return index_plan<I>(e.condition);
    else if constexpr (reads_input<I, std::remove_cvref_t<decltype(e.a)>>) return index_plan<I>(e.a);
    else return index_plan<I>(e.b);
  } else if constexpr (requires { e.a; e.b; }) {
    if constexpr (reads_input<I, std::remove_cvref_t<decltype(e.a)>>) return index_plan<I>(e.a);
    else return index_plan<I>(e.b);
  } else if constexpr (requires { e.op; e.a; }) {
    return index_plan<I>(e.a);
  } else if constexpr (detail::passes_coordinates<E>) {
    detail::same_sizes(e);
    return index_plan<I>(e.a);
  } else {
    const auto map = detail::operand_map(e);
    return mapped_at<std::remove_const_t<decltype(map)>, decltype(index_plan<I>(e.a))>{map, index_plan<I>(e.a)};
  }
}

}  // namespace attn::cuda_backend
