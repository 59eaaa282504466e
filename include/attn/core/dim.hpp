// Dimensions as types: a compile-time identity (a name) and an extent that is static or dynamic.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

#include "config.hpp"

namespace attn {

/// A string usable as a template argument, so that a dimension's name is part of its type.
template <std::size_t N>
struct fixed_string {
  char chars[N] = {};

  constexpr fixed_string(const char (&text)[N]) { std::copy_n(text, N, chars); }
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

/// The extent of a dimension whose size is known only at run time.
inline constexpr index_t dynamic_extent = -1;

/// A dimension. `dim<"d_model", 512>` is static; `dim<"batch">` is dynamic and takes its
/// size from the tensors that carry it. Two tensors naming the same dynamic dimension must
/// agree on its size at run time.
template <fixed_string Name, index_t Extent = dynamic_extent>
struct dim {
  static_assert(Extent > 0 || Extent == dynamic_extent,
                "attn::dim: a static extent must be positive");
  static constexpr std::string_view name = Name.view();
  static constexpr index_t extent = Extent;
  static constexpr bool is_static = Extent != dynamic_extent;
};

namespace detail {
template <class T>
inline constexpr bool is_dim = false;
template <fixed_string Name, index_t Extent>
inline constexpr bool is_dim<dim<Name, Extent>> = true;
}  // namespace detail

/// A type made by `attn::dim`.
template <class D>
concept dimension = detail::is_dim<D>;

/// A dimension whose extent is part of its type.
template <class D>
concept static_dimension = dimension<D> && D::is_static;

/// A dimension whose extent is known only at run time.
template <class D>
concept dynamic_dimension = dimension<D> && !D::is_static;

}  // namespace attn
