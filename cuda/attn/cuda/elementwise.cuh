// The generated kernel: an elementwise expression tree becomes one trivially copyable plan and
// one launch of elementwise_kernel<Plan, T, Index> (elementwise_kernel.cuh), whatever the tree's
// depth (mshadow's MapPlan); of elementwise_vector_kernel (elementwise_vectors.cuh), a run of 16
// bytes of the result a thread, where every node reads its operands in such runs.
//
// Every plan computes its node's element at the node's own row-major linear index i. Nodes that
// keep the row-major order (unary, binary, select, reshape: split, merge, rename) pass i to
// their operands unchanged, so leaves read data[i]; broadcast, permute and slice map i to the
// operand's index. Reductions and contractions are evaluated first into temporaries (their own
// kernels, or cuBLAS) and read as leaves, as the CPU backend's `materialised` does.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <utility>

#include <attn/expr.hpp>

#include "elementwise_kernel.cuh"
#include "elementwise_vectors.cuh"
#include "index_map.cuh"
#include "index_plans.cuh"
#include "memory.cuh"
#include "plan_nodes.cuh"
#include "switches.cuh"

namespace attn::cuda_backend {

// Defined in reduce.cuh, contract.cuh and below; declared here because plans call them and
// unqualified calls in templates only see what is declared before (no ADL into this namespace).
template <class T, class S, class E>
void reduce_into(const tensor_view<T, S, cuda>& dst, const E& reduction);
template <class T, class S, class E>
void contract_into(const tensor_view<T, S, cuda>& dst, const E& contraction);
template <class T, class S, class E>
void evaluate_into(const tensor_view<T, S, cuda>& dst, const E& e);

namespace detail {

using attn::detail::as_view;
using attn::detail::is_materialised;
using attn::detail::is_viewable;

/// The product of sizes[first, last): the extent of a run of dimensions.
template <class S>
index_t product(const extents<S>& sizes, std::size_t first, std::size_t last) {
  index_t p = 1;
  for (std::size_t r = first; r < last; ++r) p *= sizes[r];
  return p;
}

/// For each dimension in Ds, its stride in the operand of shape SA, or 0 where SA lacks it
/// (the operand repeats along it).
template <class SA, class... Ds>
std::array<index_t, sizeof...(Ds)> operand_strides(const extents<SA>& operand, meta::list<Ds...>) {
  const auto strides = row_major_strides(operand);
  auto one = [&]<class D>(D*) -> index_t {
    if constexpr (has_dim<SA, D>) return strides[dim_index<SA, D>];
    else return 0;
  };
  return {one(static_cast<Ds*>(nullptr))...};
}

}  // namespace detail

// Plans: the device-side form of the nodes (index_plans.cuh, plan_nodes.cuh). Each is trivially
// copyable, so that a whole tree travels to the kernel as one parameter, and names no dimension:
// a plan's type depends on the tree's structure (operations, value types, ranks) only. That keeps
// the kernel's name free of class-type template arguments (dimension names), which nvcc cannot
// print into its host stubs, and lets trees of the same structure over different dimensions share
// a kernel. `p(i)` is the node's element at its row-major linear index i, I being the kernel's
// index type (32 or 64 bits); `p(i, given)` the same with every placeholder reading `given` (the
// score a fused attention kernel holds: expr/element.hpp's placeholder). A plan's value_type is
// what it computes in: accumulate_t of the node's (float for 16-bit storage, which a leaf widens
// as it reads it and the kernel rounds once, as it stores the result).

namespace detail {

/// The map from a broadcast's or a permute's linear index to its operand's.
template <class E>
auto gather_map(const E& e) {
  using To = typename E::shape_type;
  return index_map<To::rank>::make(e.extents().sizes(), operand_strides(e.a.extents(), typename To::dims{}));
}

/// The map from a slice's linear index to its operand's.
template <class D, class A>
slice_map slice_map_of(const expr::slice<D, A>& e) {
  using S = typename A::shape_type;
  constexpr std::size_t at = dim_index<S, D>;
  const index_t inner = product(e.extents(), at + 1, S::rank);
  const index_t block = e.extents()[at] * inner;
  return {block, e.a.extents()[at] * inner, e.start * inner,
          block >= 1 && block <= index_t{0xffffffff} ? fast_divider(std::uint64_t(block)) : fast_divider()};
}

}  // namespace detail

/// planner<E>::make(e, ws) builds the plan of node E on the host; temporaries that nested
/// reductions and contractions need are owned by ws. (A class template rather than overloads
/// so that nodes may nest in any order of declaration.)
template <class E>
struct planner {
  static_assert(sizeof(E) == 0, "attn::cuda: no CUDA lowering for this expression node");
};

/// The plan type of expression E.
template <class E>
using plan_t = decltype(planner<E>::make(std::declval<const E&>(), std::declval<workspace&>()));

template <class T, class S>
struct planner<tensor_view<T, S, cuda>> {
  static leaf_plan<std::remove_const_t<T>> make(const tensor_view<T, S, cuda>& view, workspace&) {
    return {view.data()};
  }
};

template <class T, class S>
struct planner<expr::constant<T, S, cuda>> {
  static constant_plan<accumulate_t<T>> make(const expr::constant<T, S, cuda>& c, workspace&) { return {c.value}; }
};

/// A marked input (expr/derivative.hpp) is its operand.
template <std::size_t I, class A>
struct planner<expr::input<I, A>> {
  static plan_t<A> make(const expr::input<I, A>& e, workspace& ws) { return planner<A>::make(e.a, ws); }
};

template <class T, class D>
struct planner<expr::iota<T, D, cuda>> {
  static iota_plan<accumulate_t<T>> make(const expr::iota<T, D, cuda>& e, workspace&) { return {e.start}; }
};

template <class T, class S>
struct planner<expr::dropout_mask<T, S, cuda>> {
  static dropout_mask_plan<accumulate_t<T>> make(const expr::dropout_mask<T, S, cuda>& e, workspace&) {
    return {e.draws};
  }
};

template <class T, class S>
struct planner<expr::placeholder<T, S, cuda>> {
  static placeholder_plan<T> make(const expr::placeholder<T, S, cuda>&, workspace&) { return {}; }
};

template <class Op, class A>
struct planner<expr::unary<Op, A>> {
  static unary_plan<Op, plan_t<A>> make(const expr::unary<Op, A>& e, workspace& ws) {
    return {planner<A>::make(e.a, ws)};
  }
};

template <class Op, class A, class B>
struct planner<expr::binary<Op, A, B>> {
  static binary_plan<Op, plan_t<A>, plan_t<B>> make(const expr::binary<Op, A, B>& e, workspace& ws) {
    return {planner<A>::make(e.a, ws), planner<B>::make(e.b, ws)};
  }
};

template <class C, class A, class B>
struct planner<expr::select<C, A, B>> {
  static select_plan<plan_t<C>, plan_t<A>, plan_t<B>> make(const expr::select<C, A, B>& e,
                                                          workspace& ws) {
    return {planner<C>::make(e.condition, ws), planner<A>::make(e.a, ws), planner<B>::make(e.b, ws)};
  }
};

/// Stride 0 along the dimensions A lacks.
template <class To, class A>
struct planner<expr::broadcast<To, A>> {
  static gather_plan<To::rank, plan_t<A>> make(const expr::broadcast<To, A>& e, workspace& ws) {
    return {planner<A>::make(e.a, ws), detail::gather_map(e)};
  }
};

/// To's dimensions, with A's strides.
template <class To, class A>
struct planner<expr::permute<To, A>> {
  static gather_plan<To::rank, plan_t<A>> make(const expr::permute<To, A>& e, workspace& ws) {
    return {planner<A>::make(e.a, ws), detail::gather_map(e)};
  }
};

/// Split, merge and rename keep the row-major order: the linear index is the same, so the
/// node needs no plan of its own.
template <class To, class A>
struct planner<expr::reshape<To, A>> {
  static plan_t<A> make(const expr::reshape<To, A>& e, workspace& ws) {
    return planner<A>::make(e.a, ws);
  }
};

template <class D, class A>
struct planner<expr::slice<D, A>> {
  static slice_plan<plan_t<A>> make(const expr::slice<D, A>& e, workspace& ws) {
    return {planner<A>::make(e.a, ws), detail::slice_map_of(e)};
  }
};

/// Reductions and contractions inside a tree: evaluated into a temporary, then read as a leaf.
/// The temporary holds the compute type: a product of 16-bit operands is read on in float.
template <class E>
struct materialised_planner {
  static leaf_plan<accumulate_t<typename E::value_type>> make(const E& e, workspace& ws) {
    const auto result = ws.template make<accumulate_t<typename E::value_type>>(e.extents());
    evaluate_into(result, e);
    return {result.data()};
  }
};
template <class Op, class D, class A>
struct planner<expr::reduce<Op, D, A>> : materialised_planner<expr::reduce<Op, D, A>> {};
template <class K, class A, class B>
struct planner<expr::contract<K, A, B>> : materialised_planner<expr::contract<K, A, B>> {};

/// The plan of an expression; temporaries it needs live in `ws`, which must outlive the
/// launch (it frees them in stream order, so destroying it right after the launch is fine).
template <class E>
plan_t<E> make_plan(const E& e, workspace& ws) {
  return planner<E>::make(e, ws);
}

/// Whether the generated kernel takes runs of elements where a plan allows
/// (elementwise_vectors.cuh): yes, unless ATTN_ELEMENTWISE_VECTORS=0 in the environment, which
/// benchmarks set to time both kernels in one program. Tests may set it.
inline bool& elementwise_vectors() {
  static bool on = on_unless_zero("ATTN_ELEMENTWISE_VECTORS");
  return on;
}

namespace detail {

inline constexpr int elementwise_block = 256;

/// Blocks for n elements: enough for every thread to have one, at most as many as fill the
/// device once (2048 resident threads per SM); the grid-stride loop does the rest.
inline unsigned grid_for(index_t n, int block) {
  const index_t wanted = (n + block - 1) / block;
  const index_t resident = index_t{multiprocessor_count()} * (2048 / block);
  return static_cast<unsigned>(std::max<index_t>(1, std::min(wanted, resident)));
}

/// The largest number of elements any node of the fused tree spans: every index the kernel
/// computes is below it. Nested reductions and contractions are leaves here.
template <class E>
index_t largest_size(const E& e) {
  index_t n = e.extents().size();
  if constexpr (!is_tensor_view_v<E> && !is_materialised<E>)
    e.for_each_child([&](const auto& child) { n = std::max(n, largest_size(child)); });
  return n;
}

/// One launch of a generated kernel (elementwise_kernel or elementwise_vector_kernel) over
/// `count` elements or runs, the grid sized for them.
template <class Index, class Kernel, class Plan, class T>
void launch_plan(Kernel kernel, const Plan& p, T* out, index_t count) {
  static_assert(std::is_trivially_copyable_v<Plan>,
                "attn::cuda: a plan must be trivially copyable to be a kernel parameter");
  // Kernel parameters may take 32764 bytes since CUDA 12.1 (Volta and later).
  static_assert(sizeof(Plan) <= 32764,
                "attn::cuda: the expression is too large for one kernel; evaluate part of it first");
  kernel<<<grid_for(count, elementwise_block), elementwise_block, 0, stream()>>>(p, out, static_cast<Index>(count));
  ATTN_CUDA_CHECK(cudaGetLastError());
}

/// Launches the generated kernel.
///
/// Kernel template arguments go through std::type_identity_t: nvcc writes them into its host
/// stub as spelled, and a spelling through an alias whose qualifier names an expression type
/// (plan_t<E>, E::op_type) prints the dimensions' names as class-type template arguments,
/// in a syntax g++ rejects. type_identity<X>::type is printed with X canonical, which names
/// no dimension. (nvcc 13.0; applies to every kernel of this backend.)
template <class Index, int Unroll = elementwise_unroll, class Plan, class T>
void launch_elementwise(const Plan& p, T* out, index_t n) {
  launch_plan<Index>(elementwise_kernel<std::type_identity_t<Plan>, std::type_identity_t<T>, Index, Unroll>, p, out, n);
}

/// Launches the generated kernel a run of vector_width<T> elements at a time
/// (elementwise_vectors.cuh): the caller checked runs_in_vectors.
template <class Index, class Plan, class T>
void launch_elementwise_vectors(const Plan& p, T* out, index_t n) {
  constexpr int v = vector_width<T>;
  launch_plan<Index>(elementwise_vector_kernel<std::type_identity_t<Plan>, std::type_identity_t<T>, Index, v>, p, out,
                     n / v);
}

/// One launch with the given index type (exposed so that tests can force 64-bit indices): a run
/// of elements a thread where the plan allows and elementwise_vectors() is on, else an element.
template <class Index, class T, class S, class E>
void evaluate_elementwise_with(const tensor_view<T, S, cuda>& dst, const E& e) {
  static_assert(std::is_same_v<typename E::value_type, std::remove_const_t<T>> ||
                    std::is_same_v<accumulate_t<typename E::value_type>, std::remove_const_t<T>>,
                "attn::cuda: the expression's value type differs from the destination's");
  const index_t n = dst.size();
  if (n == 0) return;
  workspace ws;
  const auto plan = make_plan(e, ws);
  if constexpr (may_take_runs<std::remove_cvref_t<decltype(plan)>, std::remove_const_t<T>>) {
    if (elementwise_vectors() && runs_in_vectors(plan, dst.data(), n)) {
      launch_elementwise_vectors<Index>(plan, dst.data(), n);
      return;
    }
  }
  launch_elementwise<Index>(plan, dst.data(), n);
}

}  // namespace detail

/// Evaluates an elementwise tree (any depth; nested reductions and contractions first) into
/// dst with one kernel launch. dst must not overlap what the tree reads at other positions:
/// executor<cuda>::assign checks that. A bare view is copied with cudaMemcpyAsync instead.
/// dst holds the tree's value type, or its compute type (a temporary in float of a 16-bit
/// tree, read on by a reduction or a product).
template <class T, class S, class E>
void evaluate_elementwise(const tensor_view<T, S, cuda>& dst, const E& e) {
  if constexpr (is_tensor_view_v<E> && std::is_same_v<typename E::value_type, std::remove_const_t<T>>) {
    memory<cuda>::copy(dst.data(), e.data(), static_cast<std::size_t>(dst.size()) * sizeof(T));
  } else if (detail::largest_size(e) <= std::numeric_limits<std::int32_t>::max()) {
    // 32-bit division is several times cheaper than 64-bit on the GPU; broadcast, permute
    // and slice divide once or more per element.
    detail::evaluate_elementwise_with<std::uint32_t>(dst, e);
  } else {
    detail::evaluate_elementwise_with<index_t>(dst, e);
  }
}

/// Evaluates any expression into dst, which nothing in it reads: reductions and
/// contractions straight into dst, everything else with the generated kernel.
template <class T, class S, class E>
void evaluate_into(const tensor_view<T, S, cuda>& dst, const E& e) {
  if constexpr (requires { typename E::contracted_dim; }) contract_into(dst, e);
  else if constexpr (requires { typename E::reduced_dim; }) reduce_into(dst, e);
  else evaluate_elementwise(dst, e);
}

}  // namespace attn::cuda_backend
