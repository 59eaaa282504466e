// What a coordinate plan (coordinate_plan.cuh, plan_nodes.cuh) costs each evaluation, in rough
// sm_90 instructions: a few for arithmetic, a load or a conversion, many for a transcendental
// function, a division or a reshape's divisions. The tensor-core fused attention kernels inline a
// score modification that costs little at each of a lane's unrolled scores and call one that
// costs more out of line (fused_attention_tensor_cores.cuh says why both). A node or an operation
// not named here counts as costly: a plan of a type this file does not know is called, as every
// plan was before. No CUDA run-time here.
#pragma once

#include <cstddef>
#include <type_traits>

#include <attn/expr/ops.hpp>

#include "coordinate_plan.cuh"
#include "plan_nodes.cuh"
#include "position.cuh"

namespace attn::cuda_backend {

/// The cost of anything not known to be cheap: tanh, exp and log (a dozen instructions and more
/// in float), a division, a user's operation.
inline constexpr int costly = 24;

/// An operation's cost beside its operands': an instruction or two for arithmetic, a
/// comparison, an absolute value or a cast (a 16-bit type rounds, then widens); `costly` for
/// the rest.
namespace detail {
template <class Op, class... Cheap>
inline constexpr bool is_one_of = (std::is_same_v<Op, Cheap> || ...);
}  // namespace detail
template <class Op>
inline constexpr int operation_cost =
    detail::is_one_of<Op, op::negate, op::abs, op::relu, op::add, op::subtract, op::multiply, op::maximum,
                      op::minimum, op::less, op::less_equal, op::greater, op::greater_equal, op::equal_to,
                      op::not_equal_to>
        ? 1
        : costly;
template <class To>
inline constexpr int operation_cost<op::cast<To>> = 2;

/// A plan's cost, its operands' included.
template <class P>
inline constexpr int plan_cost = costly;

template <class T>
inline constexpr int plan_cost<constant_plan<T>> = 0;
template <class T>
inline constexpr int plan_cost<placeholder_plan<T>> = 0;
template <class Op, class A>
inline constexpr int plan_cost<unary_plan<Op, A>> = operation_cost<Op> + plan_cost<A>;
template <class Op, class A, class B>
inline constexpr int plan_cost<binary_plan<Op, A, B>> = operation_cost<Op> + plan_cost<A> + plan_cost<B>;
template <class C, class A, class B>
inline constexpr int plan_cost<select_plan<C, A, B>> = 1 + plan_cost<C> + plan_cost<A> + plan_cost<B>;

/// The offset's multiply-adds, a coordinate each.
template <std::size_t R>
inline constexpr int plan_cost<offset_of<R>> = int(R);
/// The offset and the load (from the cache: a modification's inputs are small).
template <class T, std::size_t R>
inline constexpr int plan_cost<data_at<T, R>> = int(R) + 1;
/// The coordinate converted, the start added.
template <class T>
inline constexpr int plan_cost<iota_at<T>> = 2;
/// A broadcast or a permute picks coordinates: nothing to compute.
template <std::size_t... From, class A>
inline constexpr int plan_cost<mapped_at<pick<From...>, A>> = plan_cost<A>;
template <std::size_t Dim, class A>
inline constexpr int plan_cost<mapped_at<shift<Dim>, A>> = 1 + plan_cost<A>;
/// A reshape: the offset, then a division by multiplying for each of the operand's coordinates
/// (about a hundred instructions each where the offsets pass 32 bits).
template <std::size_t R, std::size_t RA, class A>
inline constexpr int plan_cost<mapped_at<relayout<R, RA>, A>> = int(R) + 6 * int(RA) + plan_cost<A>;

/// What a fused kernel inlines at each of its scores: ALiBi's modification (score, derivative
/// and its slopes' gradient) costs 22 by these counts; a soft cap's, with its tanh and divisions
/// in each of the three, 379.
inline constexpr int inlined_cost = 32;

}  // namespace attn::cuda_backend
