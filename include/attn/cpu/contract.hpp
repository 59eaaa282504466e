// Contractions on the CPU: batches of matrix products, through OpenBLAS's sgemm/dgemm when the
// `blas` option is on (gemm.hpp; Eigen's product without it, and Eigen's loops for small
// products) or, for float, oneDNN's sgemm when the `dnnl` option is on (dnnl_gemm.hpp).
// Operands already laid out as [batch..., rows, cols] are used in place, transposed or not; any
// other operand is first evaluated into that layout. 16-bit operands are
// widened to float on the way (the CPU has no 16-bit GEMM worth the name) and the product,
// accumulated in float, is rounded once where it is stored: what tensor cores compute.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "../expr/contract.hpp"
#include "conversions.hpp"
#include "dnnl_gemm.hpp"
#include "evaluate.hpp"
#include "gemm.hpp"
#include "lowering.hpp"
#include "permute.hpp"
#include "row_addition.hpp"
#include "threads.hpp"

namespace attn::cpu_backend {

namespace detail {

/// An operand as a pointer to [batch..., P..., Q...] elements; `transposed` when stored as
/// [batch..., Q..., P...] instead. `storage` owns a temporary when one was needed.
template <class T, class Preferred>
struct gemm_operand {
  const T* data = nullptr;
  bool transposed = false;
  tensor<T, Preferred, cpu> storage;
};

using attn::detail::as_view;
using attn::detail::is_viewable;

/// Whether `dst = e` only copies or converts an array, e being a view (or a cast of one) laid
/// out as dst, with a 16-bit type on either side: then it is a memmove or a conversion over the
/// array at the vectors' width (conversions.hpp), where Eigen's road widened and rounded an
/// element at a time. Float and double copies stay with Eigen, which vectorises them.
template <class T, class S, class E>
struct plain_conversion {
  static constexpr bool matches = false;
};

template <class T, class S, class E>
  requires is_viewable<E> && std::is_same_v<typename E::shape_type, S>
struct plain_conversion<T, S, E> {
  using from = std::remove_const_t<typename E::value_type>;
  static constexpr bool matches = (is_float16_storage<T> && (std::is_same_v<from, float> || std::is_same_v<from, T>)) ||
                                  (std::is_same_v<T, float> && is_float16_storage<from>);
  static auto of(const E& e) { return as_view(e); }
};

template <class T, class S, class A>
  requires is_viewable<A> && std::is_same_v<typename A::shape_type, S>
struct plain_conversion<T, S, expr::unary<op::cast<T>, A>> : plain_conversion<T, S, A> {
  static auto of(const expr::unary<op::cast<T>, A>& e) { return as_view(e.a); }
};

/// Whether `dst = e` is x + p repeated along x's leading dimensions, x and p views of dst's
/// type and p's dimensions x's last ones (grad::add_broadcast of the positional encodings over
/// the batch): then x's rows of p's size each get p added, in one pass (add_repeated_rows).
/// Eigen's broadcast recomputed p's index for every element, and for 16-bit numbers converted
/// an element at a time: an eighth of a bfloat16 training step.
template <class T, class S, class E>
struct repeated_rows_addition {
  static constexpr bool matches = false;
};

template <class T, class S, class X, class P>
  requires is_viewable<X> && is_viewable<P> && std::is_same_v<typename X::shape_type, S> &&
           std::is_same_v<std::remove_const_t<typename X::value_type>, T> &&
           std::is_same_v<std::remove_const_t<typename P::value_type>, T> &&
           std::is_same_v<meta::concat_t<meta::difference_t<typename S::dims, typename P::shape_type::dims>,
                                         typename P::shape_type::dims>,
                          typename S::dims>
struct repeated_rows_addition<T, S, expr::binary<op::add, X, expr::broadcast<S, P>>> {
  static constexpr bool matches = true;
};

/// y[r, :] = x[r, :] + p for every row r of p's size (y may be x), computed as Eigen's road
/// computes it: in float for 16-bit numbers, each sum rounded once. Never called with no
/// elements (lower_into_view returns first), so p has a width to divide by.
template <class T>
void add_repeated_rows(T* y, const T* x, const T* p, index_t size, index_t width) {
  if constexpr (is_float16_storage<T>) {
    auto wide_x = conversions::widened(x, size);
    add_to_rows<false>(y, wide_x.data(), p, size / width, width);
  } else {
    add_to_rows<false>(y, x, p, size / width, width);
  }
}

template <class T, class S, class E>
void lower_into_view(const tensor_view<T, S, cpu>& dst, const E& e) {
  // Nothing to write (an empty batch); Eigen's broadcast asserts on an operand with no elements.
  if (dst.size() == 0) return;
  if constexpr (row_permutation<T, E>::matches) {
    copy_rows(dst.data(), row_permutation<T, E>::of(e));
  } else if constexpr (repeated_rows_addition<T, S, E>::matches) {
    const auto p = as_view(e.b.a);
    add_repeated_rows(dst.data(), as_view(e.a).data(), p.data(), dst.size(), p.size());
  } else if constexpr (plain_conversion<T, S, E>::matches) {
    const auto source = plain_conversion<T, S, E>::of(e);
    if constexpr (std::is_same_v<typename plain_conversion<T, S, E>::from, T>) {
      if (source.data() != dst.data()) std::memmove(dst.data(), source.data(), sizeof(T) * std::size_t(dst.size()));
    } else if constexpr (std::is_same_v<T, float>) {
      conversions::widen(dst.data(), source.data(), dst.size());
    } else {
      conversions::narrow(dst.data(), source.data(), dst.size());
    }
  } else if constexpr (is_float16_storage<T>) {
    // Computed in float on Eigen's vectors and rounded over the array: a cast to 16 bits at the
    // end of the expression made Eigen evaluate all of it an element at a time.
    lowering<E> source(e);
    tensor<float, S, cpu> wide(dst.extents(), uninitialized);
    eigen_map_mut<float, S::rank> out(wide.data(), eigen_sizes(dst.extents()));
    run_assign(out, source.eigen());
    conversions::narrow(dst.data(), wide.data(), dst.size());
  } else {
    lowering<E> source(e);
    eigen_map_mut<T, S::rank> out(dst.data(), eigen_sizes(dst.extents()));
    run_assign(out, stored_as<T>(source.eigen()));
  }
}

/// Finds or makes an operand laid out as Preferred ([batch, rows, k]) or Transposed, in the
/// compute type. A 16-bit view is widened as it lies (a conversion over the array): in either
/// layout the product reads it so, transposed or not, and otherwise it is laid out in float as
/// any other operand.
template <class Preferred, class Transposed, class X>
auto prepare_operand(const X& x) {
  using T = accumulate_t<typename X::value_type>;
  using S = typename X::shape_type;
  constexpr bool in_place = is_viewable<X> && std::is_same_v<T, typename X::value_type>;
  if constexpr (in_place && std::is_same_v<S, Preferred>) {
    return gemm_operand<T, shape<>>{as_view(x).data(), false, tensor<T, shape<>, cpu>()};
  } else if constexpr (in_place && std::is_same_v<S, Transposed>) {
    return gemm_operand<T, shape<>>{as_view(x).data(), true, tensor<T, shape<>, cpu>()};
  } else if constexpr (is_viewable<X> && is_float16_storage<std::remove_const_t<typename X::value_type>>) {
    tensor<T, S, cpu> wide(x.extents(), uninitialized);
    conversions::widen(wide.data(), as_view(x).data(), wide.size());
    if constexpr (std::is_same_v<S, Preferred> || std::is_same_v<S, Transposed>) {
      const T* data = wide.data();
      // Read transposed only where the layouts differ (an operand with no free dimension has one
      // layout, Preferred's, as the float operand's first branch above reads it).
      return gemm_operand<T, S>{data, !std::is_same_v<S, Preferred>, std::move(wide)};
    } else {
      return prepare_operand<Preferred, Transposed>(wide.view());
    }
  } else {
    tensor<T, Preferred, cpu> storage(gather_extents<Preferred>(x.extents()), uninitialized);
    if constexpr (std::is_same_v<S, Preferred>) {
      lower_into_view(storage.view(), x);
    } else {
      lower_into_view(storage.view(), expr::permute<Preferred, X>(x));
    }
    const T* data = storage.data();
    return gemm_operand<T, Preferred>{data, false, std::move(storage)};
  }
}

/// c[i] = op(a[i]) · op(b[i]) for i < batches, row-major [m, k] · [k, n] matrices one after
/// another (`a_transposed`: a[i] stored as [k, m]; `b_transposed`: b[i] as [n, k]). A function of
/// the element type alone, not of the contraction's shapes: every product of a model shares one
/// copy of the dispatch to Eigen, BLAS and oneDNN, where each contraction had its own (45 in a
/// trainer's model).
template <class T>
void multiply_batches(T* c_data, const T* a_data, bool a_transposed, const T* b_data, bool b_transposed,
                      index_t batches, index_t m, index_t n, index_t k) {
  using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  constexpr index_t small_product = index_t{1} << 16;  // multiply-adds
  auto one_product = [&](index_t i) {
    Eigen::Map<matrix> c(c_data + i * m * n, m, n);
    if (m == 0 || n == 0) return;
    if (k == 0) {
      c.setZero();
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      // Matrix-vector products (a decoding step's attention) stay off oneDNN: BLAS's gemv (gemm.hpp),
      // or Eigen's loops when small (below).
      if (m > 1 && n > 1 && dnnl_gemm_enabled())
        return dnnl_gemm(c.data(), a_data + i * m * k, a_transposed, b_data + i * k * n, b_transposed, m, n, k);
    }
    const Eigen::Map<const matrix> a_i(a_data + i * m * k, a_transposed ? k : m, a_transposed ? m : k);
    const Eigen::Map<const matrix> b_i(b_data + i * k * n, b_transposed ? n : k, b_transposed ? k : n);
    if (std::min(m, n) <= 8 && m * n * k <= small_product) {
      // A small product with a side of a few rows (a decoding step's attention: one query a
      // head, or a sentence's k hypotheses): Eigen's own loops, as a BLAS call costs more.
      if (!a_transposed && !b_transposed) c.noalias() = a_i.lazyProduct(b_i);
      else if (!a_transposed) c.noalias() = a_i.lazyProduct(b_i.transpose());
      else if (!b_transposed) c.noalias() = a_i.transpose().lazyProduct(b_i);
      else c.noalias() = a_i.transpose().lazyProduct(b_i.transpose());
      return;
    }
    gemm(c.data(), a_i.data(), a_transposed, b_i.data(), b_transposed, m, n, k);
  };

  // Many small products (attention's per-head matrices): one thread each. Few large ones:
  // in turn, each spread over all threads by the GEMM itself.
  const double flops_each = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (batches > 1 && flops_each < 4.0e6) {
    parallel_for(batches, 1, 1, [&](index_t begin, index_t end) {
      for (index_t i = begin; i < end; ++i) one_product(i);
    });
  } else {
    for (index_t i = 0; i < batches; ++i) one_product(i);
  }
}

/// The product in the destination's own type (float or double): its operands found or laid out
/// as batches of matrices, then multiplied.
template <class T, class S, class E>
void contract_wide(const tensor_view<T, S, cpu>& dst, const E& contraction) {
  using form = expr::matrix_form<E>;
  const form matrices(contraction);
  const auto a = prepare_operand<typename form::a_rows_k, typename form::a_k_rows>(contraction.a);
  const auto b = prepare_operand<typename form::b_k_cols, typename form::b_cols_k>(contraction.b);
  multiply_batches<T>(dst.data(), a.data, a.transposed, b.data, b.transposed, matrices.batches, matrices.m,
                      matrices.n, matrices.k);
}

}  // namespace detail

template <class T, class S, class E>
void contract_into(const tensor_view<T, S, cpu>& dst, const E& contraction) {
  using C = accumulate_t<std::remove_const_t<T>>;
  if constexpr (std::is_same_v<C, std::remove_const_t<T>>) {
    detail::contract_wide(dst, contraction);
  } else {  // a 16-bit destination: the product in float, then rounded once
    tensor<C, S, cpu> wide(dst.extents(), uninitialized);
    detail::contract_wide(wide.view(), contraction);
    detail::lower_into_view(dst, wide.view());
  }
}

}  // namespace attn::cpu_backend
