// Dimensions as types: a compile-time identity (a name) and an extent that is static or dynamic.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <type_traits>

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
  /// The name as given, so that detail::is_dim can rebuild the type (see there).
  static constexpr auto fixed_name = Name;
  static constexpr index_t extent = Extent;
  static constexpr bool is_static = Extent != dynamic_extent;
};

namespace detail {
// Not a partial specialisation on dim<Name, Extent>: nvcc's front end (EDG, CUDA 13) never
// matches one whose parameter is a class-type template argument deduced from a placeholder
// (`fixed_string Name`), so every dimension would fail the concept. Rebuilding the type from
// its own members and comparing is exact on every compiler.
template <class T>
struct is_dim_impl {
  static constexpr bool value = false;
};
template <class T>
  requires requires {
    typename dim<T::fixed_name, T::extent>;
  }
struct is_dim_impl<T> {
  static constexpr bool value = std::is_same_v<T, dim<T::fixed_name, T::extent>>;
};
template <class T>
inline constexpr bool is_dim = is_dim_impl<T>::value;
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
