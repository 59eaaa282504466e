// The CPU executor: `view = expression` checks the shape rule of assignment, then lowers.
#pragma once

#include <algorithm>
#include <type_traits>

#include "../expr/affine.hpp"
#include "contract.hpp"
#include "evaluate.hpp"
#include "lowering.hpp"
#include "reduce.hpp"
#include "row_addition.hpp"

namespace attn {

namespace cpu_backend::detail {

using attn::detail::is_materialised;

/// Nodes that read an operand at other positions than the one they write.
template <class E>
inline constexpr bool reorders = false;
template <class To, class A>
inline constexpr bool reorders<expr::broadcast<To, A>> = true;
template <class To, class A>
inline constexpr bool reorders<expr::permute<To, A>> = true;
template <class D, class A>
inline constexpr bool reorders<expr::slice<D, A>> = true;

/// True when some leaf of e overlaps [begin, end), looking inside every node.
template <class E>
bool reads_from(const E& e, const void* begin, const void* end) {
  if constexpr (is_tensor_view_v<E>) {
    const void* first = e.data();
    const void* last = e.data() + e.size();
    return first < end && begin < last;
  } else {
    bool found = false;
    e.for_each_child([&](const auto& child) { found = found || reads_from(child, begin, end); });
    return found;
  }
}

/// True when writing dst while evaluating e in one pass could change what e reads: a leaf
/// overlapping dst that is read through a reordering node, or from another start (a shifted
/// window). Reductions and contractions inside e read their operands into temporaries before
/// anything is written.
template <class E, class T, class S>
bool hazard(const E& e, const tensor_view<T, S, cpu>& dst, bool reordered) {
  if constexpr (is_tensor_view_v<E>) {
    const void* start = dst.data();
    return reads_from(e, start, dst.data() + dst.size()) &&
           (reordered || static_cast<const void*>(e.data()) != start);
  } else if constexpr (is_materialised<E>) {
    return false;
  } else {
    bool found = false;
    e.for_each_child([&](const auto& child) {
      found = found || hazard(child, dst, reordered || reorders<E>);
    });
    return found;
  }
}

template <class T, class S, class E>
void assign(const tensor_view<T, S, cpu>& dst, const E& e) {
  if constexpr (attn::detail::affine_epilogue<E>::matches) {
    // A linear layer's x·W + b (and ReLU): the product, then the bias added in one pass over it.
    // A 16-bit dst gets the product in float, the bias added there and the sum rounded once, as
    // the general road computes it.
    using affine = attn::detail::affine_epilogue<E>;
    if (!reads_from(e, dst.data(), dst.data() + dst.size())) {
      const auto& bias = affine::bias(e);
      const index_t width = bias.size();
      const index_t rows = width == 0 ? 0 : dst.size() / width;
      if constexpr (is_float16_storage<T>) {
        tensor<accumulate_t<T>, S, cpu> wide(dst.extents(), uninitialized);
        contract_into(wide.view(), affine::product(e));
        add_to_rows<affine::relu>(dst.data(), wide.data(), bias.data(), rows, width);
      } else {
        contract_into(dst, affine::product(e));
        add_to_rows<affine::relu>(dst.data(), dst.data(), bias.data(), rows, width);
      }
      return;
    }
  }
  if constexpr (is_materialised<E>) {
    // Straight into dst, unless dst is also an operand.
    if (!reads_from(e, dst.data(), dst.data() + dst.size())) {
      if constexpr (requires { typename E::contracted_dim; }) contract_into(dst, e);
      else reduce_into(dst, e);
      return;
    }
  }
  if (hazard(e, dst, false)) {
    tensor<T, S, cpu> temporary(dst.extents());
    lower_into_view(temporary.view(), e);
    lower_into_view(dst, temporary.view());
  } else {
    lower_into_view(dst, e);
  }
}

}  // namespace cpu_backend::detail

/// `view = expression` on the CPU.
template <>
struct executor<cpu> {
  template <class T, class S, class E>
  static void assign(const tensor_view<T, S, cpu>& dst, const E& e) {
    detail::check_assignment<T, S, cpu, E>();
    check_common_extents("attn::assign", dst.extents(), e.extents());
    cpu_backend::detail::assign(dst, e);
  }
};

}  // namespace attn
