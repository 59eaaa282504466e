// Lowering: each expression node becomes the Eigen tensor expression that computes it.
// Elementwise, broadcast, permute, reshape and slice nodes nest into one Eigen expression
// (one fused pass); reductions and contractions are evaluated first into temporaries
// (mshadow's split: GEMMs and reductions are engines, not loops), then read as leaves.
// Every node computes in accumulate_t of its value type: a leaf of 16-bit storage is read
// through a cast to float, and the destination rounds once (stored_as, eigen.hpp).
#pragma once

#include <array>
#include <memory>
#include <type_traits>

#include "../expr.hpp"
#include "conversions.hpp"
#include "eigen.hpp"

namespace attn::cpu_backend {

// Defined in reduce.hpp and contract.hpp; declared here because lowering calls them.
template <class T, class S, class E>
void reduce_into(const tensor_view<T, S, cpu>& dst, const E& reduction);
template <class T, class S, class E>
void contract_into(const tensor_view<T, S, cpu>& dst, const E& contraction);

/// lowering<E> holds what the Eigen expression of E refers to (maps, temporaries) and makes
/// that expression with eigen(). Maps are returned by reference (Eigen nests them so); the
/// lowering object must outlive the evaluation.
template <class E>
struct lowering;

/// A leaf. A 16-bit one is widened to float once, over the array (conversions.hpp), so that
/// the expression reading it runs on Eigen's vectors: read through a cast, it ran an element
/// at a time (and the conversions were most of a 16-bit CPU training step).
template <class T, class S>
struct lowering<tensor_view<T, S, cpu>> {
  using V = std::remove_const_t<T>;
  using C = accumulate_t<V>;
  std::unique_ptr<C[]> wide;  // uninitialised until widened: no pass to zero it
  eigen_map<C, S::rank> map;
  explicit lowering(const tensor_view<T, S, cpu>& view)
      : wide(widened(view)), map(read_from(view, wide.get()), eigen_sizes(view.extents())) {}
  const eigen_map<C, S::rank>& eigen() const { return map; }

 private:
  static const C* read_from(const tensor_view<T, S, cpu>& view, const C* widened_copy) {
    if constexpr (is_float16_storage<V>) return widened_copy;
    else return view.data();
  }
  static std::unique_ptr<C[]> widened(const tensor_view<T, S, cpu>& view) {
    if constexpr (!is_float16_storage<V>) {
      return nullptr;
    } else {
      std::unique_ptr<C[]> out(new C[static_cast<std::size_t>(view.size())]);
      conversions::widen(out.get(), view.data(), view.size());
      return out;
    }
  }
};

template <class T, class S>
struct lowering<expr::constant<T, S, cpu>> {
  using C = accumulate_t<T>;
  // Eigen's constants need an expression for their sizes; this map is never read.
  eigen_map<C, S::rank> shape_only;
  C value;
  explicit lowering(const expr::constant<T, S, cpu>& c)
      : shape_only(static_cast<const C*>(nullptr), eigen_sizes(c.extents())), value(c.value) {}
  auto eigen() const { return shape_only.constant(value); }
};

/// A marked input (expr/derivative.hpp) is its operand.
template <std::size_t I, class A>
struct lowering<expr::input<I, A>> {
  lowering<A> a;
  explicit lowering(const expr::input<I, A>& e) : a(e.a) {}
  decltype(auto) eigen() const { return a.eigen(); }
};

/// Eigen's generator op, called with each element's coordinates (one here).
template <class T, class D>
struct lowering<expr::iota<T, D, cpu>> {
  using C = accumulate_t<T>;
  struct positions {
    C start;
    C operator()(const std::array<Eigen::Index, 1>& at) const { return start + static_cast<C>(at[0]); }
  };
  eigen_map<C, 1> shape_only;  // sizes for the generator; never read
  C start;
  explicit lowering(const expr::iota<T, D, cpu>& e)
      : shape_only(static_cast<const C*>(nullptr), eigen_sizes(e.extents())), start(e.start) {}
  auto eigen() const { return shape_only.generate(positions{start}); }
};

/// Eigen's nullary op, called with each element's row-major index (the maps are row-major).
template <class T, class S>
struct lowering<expr::dropout_mask<T, S, cpu>> {
  using C = accumulate_t<T>;
  struct at_index {
    dropout_draws<C> draws;
    C operator()(Eigen::Index i) const { return draws(static_cast<std::uint64_t>(i)); }
  };
  eigen_map<C, S::rank> shape_only;  // sizes for the op; never read
  at_index op;
  explicit lowering(const expr::dropout_mask<T, S, cpu>& e)
      : shape_only(static_cast<const C*>(nullptr), eigen_sizes(e.extents())), op{e.draws} {}
  auto eigen() const { return shape_only.nullaryExpr(op); }
};

namespace detail {
template <class X> auto apply(op::negate, const X& x) { return -x; }
template <class X> auto apply(op::exp, const X& x) { return x.exp(); }
template <class X> auto apply(op::log, const X& x) { return x.log(); }
template <class X> auto apply(op::sqrt, const X& x) { return x.sqrt(); }
template <class X> auto apply(op::rsqrt, const X& x) { return x.rsqrt(); }
template <class X> auto apply(op::tanh, const X& x) { return x.tanh(); }
template <class X> auto apply(op::abs, const X& x) { return x.abs(); }
template <class X> auto apply(op::relu, const X& x) {
  return x.cwiseMax(typename X::Scalar(0));
}
/// A cast to a 16-bit type rounds there and goes on in float.
template <class To, class X> auto apply(op::cast<To>, const X& x) {
  if constexpr (is_float16_storage<To>) return x.template cast<To>().template cast<accumulate_t<To>>();
  else return x.template cast<To>();
}

template <class X, class Y> auto apply(op::add, const X& x, const Y& y) { return x + y; }
template <class X, class Y> auto apply(op::subtract, const X& x, const Y& y) { return x - y; }
template <class X, class Y> auto apply(op::multiply, const X& x, const Y& y) { return x * y; }
template <class X, class Y> auto apply(op::divide, const X& x, const Y& y) { return x / y; }
template <class X, class Y> auto apply(op::maximum, const X& x, const Y& y) { return x.cwiseMax(y); }
template <class X, class Y> auto apply(op::minimum, const X& x, const Y& y) { return x.cwiseMin(y); }
template <class X, class Y> auto apply(op::less, const X& x, const Y& y) { return x < y; }
template <class X, class Y> auto apply(op::less_equal, const X& x, const Y& y) { return x <= y; }
template <class X, class Y> auto apply(op::greater, const X& x, const Y& y) { return x > y; }
template <class X, class Y> auto apply(op::greater_equal, const X& x, const Y& y) { return x >= y; }
// Eigen's member operators called by name: C++20 also considers `y == x` for `x == y` (and for
// `x != y`), and with the operator a member of Eigen's base class neither order converts
// better (clang warns of the ambiguity).
template <class X, class Y> auto apply(op::equal_to, const X& x, const Y& y) { return x.operator==(y); }
template <class X, class Y> auto apply(op::not_equal_to, const X& x, const Y& y) { return x.operator!=(y); }
}  // namespace detail

template <class Op, class A>
struct lowering<expr::unary<Op, A>> {
  lowering<A> a;
  explicit lowering(const expr::unary<Op, A>& e) : a(e.a) {}
  auto eigen() const { return detail::apply(Op{}, a.eigen()); }
};

template <class Op, class A, class B>
struct lowering<expr::binary<Op, A, B>> {
  lowering<A> a;
  lowering<B> b;
  explicit lowering(const expr::binary<Op, A, B>& e) : a(e.a), b(e.b) {}
  auto eigen() const { return detail::apply(Op{}, a.eigen(), b.eigen()); }
};

template <class C, class A, class B>
struct lowering<expr::select<C, A, B>> {
  lowering<C> condition;
  lowering<A> a;
  lowering<B> b;
  explicit lowering(const expr::select<C, A, B>& e) : condition(e.condition), a(e.a), b(e.b) {}
  auto eigen() const { return condition.eigen().select(a.eigen(), b.eigen()); }
};

template <class To, class A>
struct lowering<expr::broadcast<To, A>> {
  lowering<A> a;
  Eigen::DSizes<Eigen::Index, static_cast<int>(To::rank)> with_ones;  // A's sizes, 1 where absent
  Eigen::DSizes<Eigen::Index, static_cast<int>(To::rank)> repeats;    // To's sizes where absent
  explicit lowering(const expr::broadcast<To, A>& e) : a(e.a) {
    fill(e, typename To::dims{});
  }
  auto eigen() const { return a.eigen().reshape(with_ones).broadcast(repeats); }

 private:
  template <class... Ds>
  void fill(const expr::broadcast<To, A>& e, meta::list<Ds...>) {
    int i = 0;
    ((has_dim<typename A::shape_type, Ds>
          ? (with_ones[i] = e.extents()[static_cast<std::size_t>(i)], repeats[i] = 1)
          : (with_ones[i] = 1, repeats[i] = e.extents()[static_cast<std::size_t>(i)]),
      ++i),
     ...);
  }
};

template <class To, class A>
struct lowering<expr::permute<To, A>> {
  lowering<A> a;
  std::array<Eigen::Index, To::rank> order;
  explicit lowering(const expr::permute<To, A>& e) : a(e.a) {
    const auto positions = expr::permute<To, A>::source_positions();
    for (std::size_t i = 0; i < To::rank; ++i) order[i] = static_cast<Eigen::Index>(positions[i]);
  }
  auto eigen() const { return a.eigen().shuffle(order); }
};

template <class To, class A>
struct lowering<expr::reshape<To, A>> {
  lowering<A> a;
  Eigen::DSizes<Eigen::Index, static_cast<int>(To::rank)> sizes;
  explicit lowering(const expr::reshape<To, A>& e) : a(e.a), sizes(eigen_sizes(e.extents())) {}
  auto eigen() const { return a.eigen().reshape(sizes); }
};

template <class D, class A>
struct lowering<expr::slice<D, A>> {
  using S = typename A::shape_type;
  lowering<A> a;
  Eigen::DSizes<Eigen::Index, static_cast<int>(S::rank)> offsets;
  Eigen::DSizes<Eigen::Index, static_cast<int>(S::rank)> sizes;
  explicit lowering(const expr::slice<D, A>& e) : a(e.a), sizes(eigen_sizes(e.extents())) {
    for (int i = 0; i < static_cast<int>(S::rank); ++i) offsets[i] = 0;
    offsets[static_cast<int>(dim_index<S, D>)] = e.start;
  }
  auto eigen() const { return a.eigen().slice(offsets, sizes); }
};

/// Reductions and contractions: evaluated into a temporary, then read as a leaf. The temporary
/// holds the compute type: a product of 16-bit operands is read on in float, not rounded.
template <class E>
struct materialised {
  using T = accumulate_t<typename E::value_type>;
  using S = typename E::shape_type;
  tensor<T, S, cpu> result;
  eigen_map<T, S::rank> map;
  explicit materialised(const attn::extents<S>& sizes)
      : result(sizes), map(result.data(), eigen_sizes(sizes)) {}
  const auto& eigen() const { return map; }
};

template <class Op, class D, class A>
struct lowering<expr::reduce<Op, D, A>> : materialised<expr::reduce<Op, D, A>> {
  explicit lowering(const expr::reduce<Op, D, A>& e) : materialised<expr::reduce<Op, D, A>>(e.extents()) {
    reduce_into(this->result.view(), e);
  }
};

template <class K, class A, class B>
struct lowering<expr::contract<K, A, B>> : materialised<expr::contract<K, A, B>> {
  explicit lowering(const expr::contract<K, A, B>& e)
      : materialised<expr::contract<K, A, B>>(e.extents()) {
    contract_into(this->result.view(), e);
  }
};

}  // namespace attn::cpu_backend
