// The CUDA executor: `view = expression` on a device tensor checks the shape rule of
// assignment, then lowers: a product with a bias (and ReLU) to cuBLASLt with an epilogue,
// contractions to cuBLAS, reductions to row kernels, the rest to one generated elementwise kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <attn/expr.hpp>

#include "affine.cuh"
#include "contract.cuh"
#include "elementwise.cuh"
#include "memory.cuh"
#include "reduce.cuh"

namespace attn {

namespace cuda_backend::detail {

/// Nodes that read an operand at other positions than the one they write.
template <class E>
inline constexpr bool reorders = false;
template <class To, class A>
inline constexpr bool reorders<expr::broadcast<To, A>> = true;
template <class To, class A>
inline constexpr bool reorders<expr::permute<To, A>> = true;
template <class D, class A>
inline constexpr bool reorders<expr::slice<D, A>> = true;

template <class T>
std::uintptr_t address(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

/// True when the leaf's elements and [begin, end) share memory.
template <class View>
bool overlaps(const View& leaf, std::uintptr_t begin, std::uintptr_t end) {
  const std::uintptr_t first = address(leaf.data());
  const std::uintptr_t last = address(leaf.data() + leaf.size());
  return first < end && begin < last;
}

/// True when writing [begin, end) in one parallel pass could change what e reads: a leaf
/// there is read through a reordering node, or from another start (x[i + 1] while writing
/// x[i]: threads run in any order, so unlike a serial loop no shift is safe). A leaf read at
/// exactly the position being written (`x = x * 2`) is no hazard. Nested reductions and
/// contractions read their operands into temporaries before anything is written.
template <class E>
bool hazard(const E& e, std::uintptr_t begin, std::uintptr_t end, bool reordered) {
  if constexpr (is_tensor_view_v<E>) {
    return overlaps(e, begin, end) && (reordered || address(e.data()) != begin);
  } else if constexpr (is_materialised<E>) {
    return false;
  } else {
    bool found = false;
    e.for_each_child([&](const auto& child) {
      found = found || hazard(child, begin, end, reordered || reorders<E>);
    });
    return found;
  }
}

/// The hazard of evaluating e straight into [begin, end). A reduction or contraction at the
/// root writes dst while reading in place the operands that are views or reshapes of views
/// (any overlap counts: they read whole rows and matrices); its other operands go to
/// temporaries first.
template <class E>
bool root_hazard(const E& e, std::uintptr_t begin, std::uintptr_t end) {
  if constexpr (is_materialised<E>) {
    bool found = false;
    e.for_each_child([&](const auto& child) {
      if constexpr (is_viewable<std::remove_cvref_t<decltype(child)>>)
        found = found || overlaps(as_view(child), begin, end);
    });
    return found;
  } else {
    return hazard(e, begin, end, false);
  }
}

/// True when some leaf of e overlaps [begin, end), looking inside every node.
template <class E>
bool touches(const E& e, std::uintptr_t begin, std::uintptr_t end) {
  if constexpr (is_tensor_view_v<E>) {
    return overlaps(e, begin, end);
  } else {
    bool found = false;
    e.for_each_child([&](const auto& child) { found = found || touches(child, begin, end); });
    return found;
  }
}

template <class T, class S, class E>
void assign(const tensor_view<T, S, cuda>& dst, const E& e) {
  const std::uintptr_t begin = address(dst.data());
  const std::uintptr_t end = address(dst.data() + dst.size());
  if constexpr (attn::detail::affine_epilogue<E>::matches) {
    // A linear layer's x·W + b (and ReLU): one cuBLASLt product with the bias as its epilogue.
    using affine = attn::detail::affine_epilogue<E>;
    if (!touches(e, begin, end)) {
      affine_into(dst, affine::product(e), affine::bias(e), affine::relu);
      return;
    }
  }
  if (!root_hazard(e, begin, end)) {
    evaluate_into(dst, e);
    return;
  }
  // dst is also an operand: evaluate aside, then copy (in stream order, before ws frees it).
  workspace ws;
  const auto temporary = ws.template make<T>(dst.extents());
  evaluate_into(temporary, e);
  memory<cuda>::copy(dst.data(), temporary.data(), static_cast<std::size_t>(dst.size()) * sizeof(T));
}

}  // namespace cuda_backend::detail

/// `view = expression` on the GPU. Asynchronous: the work is enqueued on
/// cuda_backend::stream(); to_host() or cuda_backend::synchronize() wait for it.
template <>
struct executor<cuda> {
  template <class T, class S, class E>
  static void assign(const tensor_view<T, S, cuda>& dst, const E& e) {
    detail::check_assignment<T, S, cuda, E>();
    check_common_extents("attn::assign", dst.extents(), e.extents());
    cuda_backend::detail::assign(dst, e);
  }
};

}  // namespace attn
