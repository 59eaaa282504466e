// Shapes: ordered lists of distinct dimensions, and the type-level algebra used by shape rules.
#pragma once

#include <cstddef>
#include <string>

#include "dim.hpp"
#include "meta.hpp"

namespace attn {

/// An ordered list of distinct dimensions; the last one is contiguous in memory (row-major).
template <dimension... Ds>
struct shape {
  static_assert(meta::unique<meta::list<Ds...>>, "attn::shape: a dimension appears twice");
  using dims = meta::list<Ds...>;
  static constexpr std::size_t rank = sizeof...(Ds);
  static constexpr std::size_t rank_dynamic = (std::size_t{!Ds::is_static} + ... + 0);
  static constexpr bool is_static = rank_dynamic == 0;

  /// "[batch, len, d_model=512]": for messages and printing.
  static std::string to_string() {
    std::string text = "[";
    ((text += (text.size() > 1 ? ", " : ""), text += Ds::name,
      Ds::is_static ? (text += '=', text += std::to_string(Ds::extent)) : text),
     ...);
    return text + "]";
  }
};

namespace detail {
template <class T>
inline constexpr bool is_shape = false;
template <class... Ds>
inline constexpr bool is_shape<shape<Ds...>> = true;

template <class List>
struct list_to_shape;
template <class... Ds>
struct list_to_shape<meta::list<Ds...>> {
  using type = shape<Ds...>;
};
}  // namespace detail

template <class S>
concept shape_type = detail::is_shape<S>;

/// The shape whose dimensions are the elements of a meta::list.
template <class List>
using shape_of_list = typename detail::list_to_shape<List>::type;

/// True when the shape has dimension D.
template <class S, class D>
inline constexpr bool has_dim = meta::contains<D, typename S::dims>;

/// Position of D in S.
template <class S, class D>
inline constexpr std::size_t dim_index = meta::index_of_v<D, typename S::dims>;

/// The dimension at position I of S.
template <class S, std::size_t I>
using dim_at = meta::at_t<I, typename S::dims>;

/// S without dimension D.
template <class S, class D>
using remove_dim = shape_of_list<meta::difference_t<typename S::dims, meta::list<D>>>;

/// S with dimension D replaced by the dimensions Ds, in place.
template <class S, class D, class... Ds>
using replace_dim = shape_of_list<meta::replace_t<D, meta::list<Ds...>, typename S::dims>>;

namespace detail {
/// "#07" for I = 7: a dimension's name made from its position.
template <std::size_t I>
constexpr fixed_string<4> position_name() {
  static_assert(I < 100, "attn: positional names go up to 99 dimensions");
  const char text[4] = {'#', char('0' + I / 10), char('0' + I % 10), '\0'};
  return fixed_string<4>(text);
}
}  // namespace detail

/// D renamed by its position in the list Dims, keeping its extent. An operation whose operands'
/// dimensions are all renamed so (positional_shape) does its work under names that depend on
/// the operands' structure and extents alone, and is compiled once for all of their namings
/// (view_as, core/tensor.hpp).
template <class D, class Dims>
using positional_dim = dim<detail::position_name<meta::index_of_v<D, Dims>>(), D::extent>;

namespace detail {
template <class S, class Dims>
struct positional_shape_impl;
template <class... Ds, class Dims>
struct positional_shape_impl<shape<Ds...>, Dims> {
  using type = shape<positional_dim<Ds, Dims>...>;
};
}  // namespace detail

/// S with each dimension renamed by its position in Dims (which holds all of S's).
template <class S, class Dims>
using positional_shape = typename detail::positional_shape_impl<S, Dims>::type;

/// S with each dimension renamed by its own position (#00, #01, …): an elementwise operation's
/// names of its own.
template <class S>
using positional = positional_shape<S, typename S::dims>;

}  // namespace attn
