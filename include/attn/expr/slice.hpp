// Slicing along a dynamic dimension: positions [start, start + count) of a sequence or batch.
#pragma once

#include <string>
#include <utility>

#include "expression.hpp"

namespace attn {

namespace expr {

/// The elements of A whose index along D lies in [start, start + count).
template <dimension D, expression A>
struct slice {
  using value_type = typename A::value_type;
  using shape_type = typename A::shape_type;
  using device_type = typename A::device_type;
  using sliced_dim = D;

  A a;
  index_t start;
  attn::extents<shape_type> sizes;

  slice(A a_, index_t start_, index_t count) : a(a_), start(start_), sizes(a.extents()) {
    const index_t extent = a.extents().template extent<D>();
    if (start < 0 || count < 0 || start + count > extent)
      throw extent_error("attn::slice", D::name,
                         "has extent " + std::to_string(extent) + ", too small for [" +
                             std::to_string(start) + ", " + std::to_string(start + count) + ")");
    auto all = sizes.sizes();
    all[dim_index<shape_type, D>] = count;
    sizes = attn::extents<shape_type>::from_array(all);
  }
  const attn::extents<shape_type>& extents() const { return sizes; }
  template <class F>
  void for_each_child(F&& f) const { f(a); }
};

}  // namespace expr

/// `slice<len>(x, 3, 4)`: positions 3..6 along `len`. The dimension keeps its name and
/// takes the new size, so mixing it with unsliced operands is caught at run time.
template <dimension D, operand A>
auto slice(A&& a, index_t start, index_t count) {
  static_assert(has_dim<shape_t<A>, D>, "attn::slice: the sliced dimension is not in the shape");
  static_assert(!D::is_static, "attn::slice: only a dynamic dimension can be sliced");
  return expr::slice<D, operand_t<A>>(as_operand(std::forward<A>(a)), start, count);
}

}  // namespace attn
