// Extents: the run-time sizes of a shape's dimensions, static ones fixed by their type.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>

#include "error.hpp"
#include "shape.hpp"

namespace attn {

template <class S>
class extents;

/// The sizes of a shape's dimensions. Static dimensions always hold their type's extent;
/// dynamic ones are given at construction, in the order they appear in the shape.
template <dimension... Ds>
class extents<shape<Ds...>> {
 public:
  using shape_type = shape<Ds...>;
  static constexpr std::size_t rank = sizeof...(Ds);
  static constexpr std::size_t rank_dynamic = shape_type::rank_dynamic;

  constexpr extents()
    requires(rank_dynamic == 0)
      : sizes_{Ds::extent...} {}

  /// One size for each dynamic dimension, in shape order.
  template <std::integral... Sizes>
    requires(rank_dynamic > 0 && sizeof...(Sizes) == rank_dynamic)
  constexpr explicit extents(Sizes... dynamic_sizes) {
    const std::array<index_t, rank_dynamic> given{static_cast<index_t>(dynamic_sizes)...};
    std::size_t next = 0;
    std::size_t i = 0;
    ((sizes_[i++] = Ds::is_static ? Ds::extent : given[next++]), ...);
    check_sizes();
  }

  /// Every dimension's size, static ones included (they must match their type).
  static constexpr extents from_array(const std::array<index_t, rank>& all) {
    extents result(uninitialised{});
    result.sizes_ = all;
    result.check_sizes();
    return result;
  }

  /// Other's sizes under this shape's names: the two shapes' dimensions have the same extents,
  /// position by position (static and equal, or dynamic), so there is nothing to check.
  template <class Other>
  static constexpr extents renamed(const extents<Other>& other) {
    static_assert(Other::rank == rank, "attn::extents::renamed: the shapes' ranks differ");
    if constexpr (Other::rank == rank)
      static_assert([]<class... Os>(meta::list<Os...>) { return ((Ds::extent == Os::extent) && ...); }(
                        typename Other::dims{}),
                    "attn::extents::renamed: the shapes' extents differ");
    extents result(uninitialised{});
    result.sizes_ = other.sizes();
    return result;
  }

  template <dimension D>
  constexpr index_t extent() const {
    static_assert(has_dim<shape_type, D>, "attn::extents: dimension not in shape");
    if constexpr (D::is_static) return D::extent;
    else return sizes_[dim_index<shape_type, D>];
  }

  constexpr index_t operator[](std::size_t i) const { return sizes_[i]; }
  constexpr const std::array<index_t, rank>& sizes() const { return sizes_; }

  /// Number of elements.
  constexpr index_t size() const {
    index_t n = 1;
    for (index_t s : sizes_) n *= s;
    return n;
  }

  /// Row-major stride of dimension D, in elements.
  template <dimension D>
  constexpr index_t stride() const {
    index_t s = 1;
    for (std::size_t i = dim_index<shape_type, D> + 1; i < rank; ++i) s *= sizes_[i];
    return s;
  }

  friend constexpr bool operator==(const extents&, const extents&) = default;

  /// "[batch=2, len=7, d_model=512]".
  std::string to_string() const {
    std::string text = "[";
    std::size_t i = 0;
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string.
    ((text += (i ? ", " : ""), text += Ds::name, text += '=', text += std::to_string(sizes_[i++])),
     ...);
    return text + "]";
  }

 private:
  struct uninitialised {};
  constexpr explicit extents(uninitialised) {}

  constexpr void check_sizes() const {
    std::size_t i = 0;
    (check_one<Ds>(sizes_[i++]), ...);
  }
  template <class D>
  static constexpr void check_one(index_t size) {
    if (size < 0) throw extent_error("attn::extents", D::name, "cannot have a negative extent");
    if (D::is_static && size != D::extent)
      throw extent_error("attn::extents", D::name, D::extent, size);
  }

  std::array<index_t, rank> sizes_{};
};

namespace detail {
template <class D, class SA, class SB>
constexpr void check_one_common(std::string_view operation, const extents<SA>& a,
                                const extents<SB>& b) {
  if constexpr (!D::is_static && has_dim<SB, D>) {
    if (a.template extent<D>() != b.template extent<D>())
      throw extent_error(operation, D::name, a.template extent<D>(), b.template extent<D>());
  }
}
template <class SA, class SB, class... Ds>
constexpr void check_common_dims(std::string_view operation, const extents<SA>& a,
                                 const extents<SB>& b, meta::list<Ds...>) {
  (void)operation;  // unused when there are no dimensions
  (check_one_common<Ds>(operation, a, b), ...);
}
}  // namespace detail

/// Checks that every dynamic dimension the two shapes share has one size; throws
/// attn::extent_error naming the operation, the dimension and both sizes otherwise.
template <class SA, class SB>
constexpr void check_common_extents(std::string_view operation, const extents<SA>& a,
                                    const extents<SB>& b) {
  detail::check_common_dims(operation, a, b, typename SA::dims{});
}

namespace detail {
template <class D, class Source>
constexpr void take_extent(index_t& size, const Source& source) {
  if constexpr (has_dim<typename Source::shape_type, D>) {
    if (size < 0) size = source.template extent<D>();
  }
}
template <class D, class... Sources>
constexpr index_t find_extent(const Sources&... sources) {
  if constexpr (D::is_static) {
    return D::extent;
  } else {
    index_t size = -1;
    (take_extent<D>(size, sources), ...);
    return size;
  }
}
template <class To, class... Ds, class... Sources>
constexpr extents<To> gather(meta::list<Ds...>, const Sources&... sources) {
  return extents<To>::from_array({find_extent<Ds>(sources...)...});
}
}  // namespace detail

/// Extents of shape To, each dimension's size taken from the first source that has it.
template <class To, class... Sources>
constexpr extents<To> gather_extents(const Sources&... sources) {
  return detail::gather<To>(typename To::dims{}, sources...);
}

}  // namespace attn
