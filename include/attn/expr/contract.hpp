// Contraction over a named dimension: the sum of products along K. Dimensions both operands
// share are batch dimensions; the others are free. Transposes are implied by the names.
#pragma once

#include <type_traits>
#include <utility>

#include "expression.hpp"

namespace attn {

namespace expr {

/// sum over K of a[..., K, ...] * b[..., K, ...]; shape [batch..., free of a..., free of b...].
template <dimension K, expression A, expression B>
struct contract {
  using contracted_dim = K;
  using batch_dims = meta::difference_t<
      meta::intersection_t<typename A::shape_type::dims, typename B::shape_type::dims>,
      meta::list<K>>;
  using a_free_dims = meta::difference_t<typename A::shape_type::dims, typename B::shape_type::dims>;
  using b_free_dims = meta::difference_t<typename B::shape_type::dims, typename A::shape_type::dims>;

  using value_type = typename A::value_type;
  using shape_type = shape_of_list<meta::concat_t<batch_dims, a_free_dims, b_free_dims>>;
  using device_type = typename A::device_type;

  A a;
  B b;
  attn::extents<shape_type> sizes;

  contract(A a_, B b_) : a(a_), b(b_), sizes(gather_extents<shape_type>(a.extents(), b.extents())) {
    check_common_extents("attn::contract", a.extents(), b.extents());
  }
  const attn::extents<shape_type>& extents() const { return sizes; }
  template <class F>
  void for_each_child(F&& f) const { f(a), f(b); }
};

/// A contraction read as `batches` matrix products [m, k] · [k, n], row-major, one after another:
/// the layouts in which an operand can be read in place (a as [batch..., a's free..., K] or,
/// transposed, [batch..., K, a's free...]; b as [batch..., K, b's free...] or [batch..., b's
/// free..., K]) and the sizes. What every backend's matrix-product call takes.
template <class E>
struct matrix_form {
  using K = typename E::contracted_dim;
  using batch = typename E::batch_dims;
  using a_free = typename E::a_free_dims;
  using b_free = typename E::b_free_dims;
  using a_rows_k = shape_of_list<meta::concat_t<batch, a_free, meta::list<K>>>;
  using a_k_rows = shape_of_list<meta::concat_t<batch, meta::list<K>, a_free>>;
  using b_k_cols = shape_of_list<meta::concat_t<batch, meta::list<K>, b_free>>;
  using b_cols_k = shape_of_list<meta::concat_t<batch, b_free, meta::list<K>>>;

  index_t batches, m, n, k;

  explicit matrix_form(const E& e)
      : batches(size_of(batch{}, e.extents())),
        m(size_of(a_free{}, e.extents())),
        n(size_of(b_free{}, e.extents())),
        k(e.a.extents().template extent<K>()) {}

 private:
  template <class... Ds, class Sizes>
  static index_t size_of(meta::list<Ds...>, const Sizes& sizes) {
    return (index_t{1} * ... * sizes.template extent<Ds>());
  }
};

}  // namespace expr

/// Contracts dimension K: `contract<d_k>(q, k)` gives q·kᵀ with shape [batch, heads, tgt, src]
/// from q [batch, heads, tgt, d_k] and k [batch, heads, src, d_k].
template <dimension K, operand A, operand B>
auto contract(A&& a, B&& b) {
  static_assert(has_dim<shape_t<A>, K>,
                "attn::contract: the contracted dimension is missing from the first operand");
  static_assert(has_dim<shape_t<B>, K>,
                "attn::contract: the contracted dimension is missing from the second operand");
  static_assert(std::is_same_v<value_t<A>, value_t<B>>,
                "attn::contract: operand value types differ");
  static_assert(std::is_same_v<device_t<A>, device_t<B>>,
                "attn::contract: operands live on different devices");
  return expr::contract<K, operand_t<A>, operand_t<B>>(as_operand(std::forward<A>(a)),
                                                       as_operand(std::forward<B>(b)));
}

namespace detail {
template <class KA, class KB>
constexpr void check_matmul() {
  static_assert(std::is_same_v<KA, KB>, "attn::matmul: contracted dimensions differ");
}
}  // namespace detail

/// Matrix product (batched over leading dimensions): a [..., m, k] times b [..., k, n].
template <operand A, operand B>
auto matmul(A&& a, B&& b) {
  using SA = shape_t<A>;
  using SB = shape_t<B>;
  static_assert(SA::rank >= 1 && SB::rank >= 2, "attn::matmul: operands need ranks >= 1 and >= 2");
  using KA = dim_at<SA, SA::rank - 1>;
  using KB = dim_at<SB, SB::rank - 2>;
  detail::check_matmul<KA, KB>();
  return contract<KA>(std::forward<A>(a), std::forward<B>(b));
}

}  // namespace attn
