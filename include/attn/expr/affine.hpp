// A product followed by a bias (and a ReLU): `contract<In>(x, w) + broadcast(b)` and
// `relu(contract<In>(x, w) + broadcast(b))`, the linear layers of paper §3.2.2 and eq. (2).
// Backends recognise the pattern in an assignment and apply the bias and ReLU as the product's
// epilogue (cuBLASLt's on the GPU; one pass over the written product on the CPU), so that the
// product's result is never stored and read again as a separate temporary.
#pragma once

#include <type_traits>

#include "broadcast.hpp"
#include "contract.hpp"
#include "elementwise.hpp"
#include "ops.hpp"

namespace attn::detail {

/// What an expression E is, seen as an affine product: `matches` when it has one of the two
/// forms with the bias a tensor view of one dimension that is the second operand's only free
/// dimension and the product's last (the output features); then `product(e)` and `bias(e)` are its parts and `relu` says whether a ReLU
/// follows.
template <class E>
struct affine_epilogue {
  static constexpr bool matches = false;
};

template <class K, class A, class B, class To, class Bias>
struct affine_epilogue<expr::binary<op::add, expr::contract<K, A, B>, expr::broadcast<To, Bias>>> {
  using expression_type = expr::binary<op::add, expr::contract<K, A, B>, expr::broadcast<To, Bias>>;
  static constexpr bool matches = [] {
    if constexpr (is_tensor_view_v<Bias>) {
      using bias_shape = typename Bias::shape_type;
      // W's only free dimension is the bias's, the result's last: one bias element a column.
      return bias_shape::rank == 1 && To::rank > 0 && std::is_same_v<dim_at<bias_shape, 0>, dim_at<To, To::rank - 1>> &&
             std::is_same_v<typename expr::contract<K, A, B>::b_free_dims, meta::list<dim_at<bias_shape, 0>>>;
    } else {
      return false;
    }
  }();
  static constexpr bool relu = false;
  static const expr::contract<K, A, B>& product(const expression_type& e) { return e.a; }
  static const Bias& bias(const expression_type& e) { return e.b.a; }
};

template <class Inner>
struct affine_epilogue<expr::unary<op::relu, Inner>> : affine_epilogue<Inner> {
  using expression_type = expr::unary<op::relu, Inner>;
  static constexpr bool relu = true;
  static const auto& product(const expression_type& e) { return affine_epilogue<Inner>::product(e.a); }
  static const auto& bias(const expression_type& e) { return affine_epilogue<Inner>::bias(e.a); }
};

}  // namespace attn::detail
