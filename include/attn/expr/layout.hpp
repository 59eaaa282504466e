// Shape-level operations that move no arithmetic: permute, split of one dimension into two
// (d_model -> heads x d_k), merge of two into one, and rename (a second name for a length).
#pragma once

#include <array>
#include <utility>

#include "expression.hpp"

namespace attn {

namespace expr {

/// A with its dimensions reordered to shape To.
template <shape_type To, expression A>
struct permute {
  using value_type = typename A::value_type;
  using shape_type = To;
  using device_type = typename A::device_type;

  A a;
  attn::extents<To> sizes;

  explicit permute(A a_) : a(a_), sizes(gather_extents<To>(a.extents())) {}
  const attn::extents<To>& extents() const { return sizes; }
  template <class F>
  void for_each_child(F&& f) const { f(a); }

  /// For each dimension of To, its position in A.
  static constexpr std::array<std::size_t, To::rank> source_positions() {
    return []<class... Ds>(meta::list<Ds...>) {
      return std::array<std::size_t, To::rank>{dim_index<typename A::shape_type, Ds>...};
    }(typename To::dims{});
  }
};

/// A with its elements read in the same order under another shape: split, merge and
/// rename all keep the row-major order, so one node serves them.
template <shape_type To, expression A>
struct reshape {
  using value_type = typename A::value_type;
  using shape_type = To;
  using device_type = typename A::device_type;

  A a;
  attn::extents<To> sizes;

  reshape(A a_, const attn::extents<To>& sizes_) : a(a_), sizes(sizes_) {}
  const attn::extents<To>& extents() const { return sizes; }
  template <class F>
  void for_each_child(F&& f) const { f(a); }
};

}  // namespace expr

namespace detail {
/// Views, and reshapes (split, merge, rename) of views: contiguous data under a shape, which
/// backends hand to GEMMs and reductions in place.
template <class E>
inline constexpr bool is_viewable = is_tensor_view_v<E>;
template <class To, class A>
inline constexpr bool is_viewable<expr::reshape<To, A>> = is_viewable<A>;

/// The view under a viewable expression, with the expression's shape.
template <class E>
  requires is_viewable<E>
auto as_view(const E& e) {
  if constexpr (is_tensor_view_v<E>) {
    return e;
  } else {
    return tensor_view<const typename E::value_type, typename E::shape_type,
                       typename E::device_type>(as_view(e.a).data(), e.extents());
  }
}
}  // namespace detail

/// Reorders the dimensions: `permute<batch, heads, len, d_k>(x)`.
template <dimension... Ds, operand A>
auto permute(A&& a) {
  using To = shape<Ds...>;
  static_assert(meta::same_set<typename To::dims, typename shape_t<A>::dims>,
                "attn::permute: the new order must name each dimension of the operand once");
  return expr::permute<To, operand_t<A>>(as_operand(std::forward<A>(a)));
}

/// Splits dimension D into Outer x Inner, in place: `split<d_model, heads, d_k>(x)`.
/// A dynamic part takes its size from the other part; when both are dynamic, pass Outer's size.
template <dimension D, dimension Outer, dimension Inner, operand A>
auto split(A&& a, index_t outer_size = -1) {
  using From = shape_t<A>;
  static_assert(has_dim<From, D>, "attn::split: the split dimension is not in the shape");
  static_assert(!(D::is_static && Outer::is_static && Inner::is_static) ||
                    Outer::extent * Inner::extent == D::extent,
                "attn::split: the parts' extents do not multiply to the split dimension's");
  using To = replace_dim<From, D, Outer, Inner>;
  auto x = as_operand(std::forward<A>(a));
  const index_t whole = x.extents().template extent<D>();
  index_t outer = Outer::is_static ? Outer::extent : outer_size;
  index_t inner = Inner::is_static ? Inner::extent : -1;
  if (outer < 0 && inner > 0) outer = whole / inner;
  if (outer <= 0)
    throw extent_error("attn::split", Outer::name, "needs a size: both parts are dynamic");
  if (inner < 0) inner = whole / outer;
  if (outer * inner != whole)
    throw extent_error("attn::split", D::name, whole, outer * inner);
  std::array<index_t, To::rank> sizes{};
  constexpr std::size_t at = dim_index<From, D>;
  for (std::size_t i = 0, j = 0; i < From::rank; ++i) {
    if (i == at) {
      sizes[j++] = outer;
      sizes[j++] = inner;
    } else {
      sizes[j++] = x.extents()[i];
    }
  }
  return expr::reshape<To, decltype(x)>(x, extents<To>::from_array(sizes));
}

/// Merges adjacent dimensions Outer, Inner into D: `merge<heads, d_v, d_model>(x)`.
template <dimension Outer, dimension Inner, dimension D, operand A>
auto merge(A&& a) {
  using From = shape_t<A>;
  static_assert(has_dim<From, Outer> && has_dim<From, Inner> &&
                    dim_index<From, Outer> + 1 == dim_index<From, Inner>,
                "attn::merge: the merged dimensions must be adjacent, outer before inner");
  static_assert(!(D::is_static && Outer::is_static && Inner::is_static) ||
                    Outer::extent * Inner::extent == D::extent,
                "attn::merge: the parts' extents do not multiply to the merged dimension's");
  static_assert(!has_dim<From, D>, "attn::merge: the merged name is already in the shape");
  using To = shape_of_list<meta::replace_t<
      Outer, meta::list<D>, meta::difference_t<typename From::dims, meta::list<Inner>>>>;
  auto x = as_operand(std::forward<A>(a));
  std::array<index_t, To::rank> sizes{};
  constexpr std::size_t at = dim_index<From, Outer>;
  for (std::size_t i = 0, j = 0; i < From::rank; ++i) {
    if (i == at) {
      sizes[j++] = x.extents()[i] * x.extents()[i + 1];
      ++i;
    } else {
      sizes[j++] = x.extents()[i];
    }
  }
  return expr::reshape<To, decltype(x)>(x, extents<To>::from_array(sizes));
}

/// Gives dimension From the name To: self-attention contracts queries of `len` with keys of
/// another name, so that the two lengths are distinct dimensions of the score.
template <dimension From, dimension To, operand A>
auto rename(A&& a) {
  using S = shape_t<A>;
  static_assert(has_dim<S, From>, "attn::rename: the renamed dimension is not in the shape");
  static_assert(!has_dim<S, To>, "attn::rename: the new name is already in the shape");
  static_assert(!(From::is_static && To::is_static) || From::extent == To::extent,
                "attn::rename: static extents differ");
  using R = replace_dim<S, From, To>;
  auto x = as_operand(std::forward<A>(a));
  return expr::reshape<R, decltype(x)>(x, extents<R>::from_array(x.extents().sizes()));
}

}  // namespace attn
