// A score modification's device form (cuda/attn/cuda/score_modification.cuh: coordinate plans,
// coordinate_plan.cuh, with the score given, and index plans for the learned inputs) against its
// host form (grad/fused_attention.hpp's evaluated_modification: element_at and input_offset), at
// every score of a small [batch, heads, queries, keys]: the modified score, its derivative by the
// score, and what each score adds to each input's gradient, for the cases of
// score_modification_cases.hpp; and whether the input's element a score reads moves along the
// keys, as the kernels are told (holds_along_keys). The plans are built from host expressions
// and run on the CPU (the device code compiled for the emulator);
// tests/gpu/score_modification_test.cu runs them on a GPU.
#include <attn/cuda/emulator.hpp>  // first: the device code below is compiled for it

#include <attn/cuda/score_modification.cuh>
#include <attn/grad/fused_attention.hpp>

#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../../gpu/score_modification_cases.hpp"

namespace {

using attn::extents;
using attn::index_t;
using attn::shape;
using attn::tensor;

using namespace score_modification_cases;

template <class X>
tensor<float, X, attn::cpu> random_tensor(const extents<X>& sizes, double lo, double hi, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  tensor<float, X, attn::cpu> x(sizes);
  for (index_t i = 0; i < x.size(); ++i) x.data()[i] = float(u(generator));
  return x;
}

/// f(s, x) with x's values, both forms at every score.
template <class F, class X>
void compare(const std::string& name, const F& f, const tensor<float, X, attn::cpu>& x_values) {
  const extents<S> sizes = score_modification_cases::sizes();
  attn::grad::variable<float, X, attn::cpu> x(tensor<float, X, attn::cpu>(x_values), true);
  const auto on_host =
      attn::grad::detail::evaluate_modification<float, S, attn::cpu>(attn::grad::modify_scores(f, x), sizes, true);
  const auto m = attn::cuda_backend::device_modification(on_host);
  static_assert(std::is_trivially_copyable_v<std::remove_const_t<decltype(m)>>);
  REQUIRE(m.size == on_host.gradient_size());
  REQUIRE(m.size == x_values.size());

  int mismatched_values = 0, mismatched_slopes = 0;
  std::vector<float> want(std::size_t(x_values.size()), 0.0f), got(want);
  for (index_t at = 0; at < sizes.size(); ++at) {
    const auto c = attn::detail::from_row_major<S>(at, sizes);
    const attn::cuda_backend::score_position p{{c[0], c[1], c[2], c[3]}};
    const float s = given(at);
    mismatched_values += on_host(c, s) != m(p, s);
    mismatched_slopes += on_host.derivative(c, s) != m.derivative(p, s);
    on_host.accumulate(c, s, 1.0f, want.data());
    m.accumulate(p, s, 1.0f, got.data());
  }
  // The same float operations in the same order, compiled by the same compiler: the same bits.
  INFO(name);
  CHECK(mismatched_values == 0);
  CHECK(mismatched_slopes == 0);
  CHECK(got == want);

  // The kernels hold a query's shares of the input's gradient (holds_along_keys) exactly where
  // the element each score reads is the same along the query's keys. (A reshape counts as
  // reading every coordinate: a case whose reshape leaves the keys alone would fail here, and
  // would say so.)
  int moves_along_keys = 0;
  for (index_t at = 0; at < sizes.size(); ++at) {
    const auto c = attn::detail::from_row_major<S>(at, sizes);
    const attn::cuda_backend::score_position p{{c[0], c[1], c[2], c[3]}}, first_key{{c[0], c[1], c[2], 0}};
    moves_along_keys += m.inputs.first.index(p) != m.inputs.first.index(first_key);
  }
  CHECK(std::remove_const_t<decltype(m)>::holds_along_keys == (moves_along_keys == 0));
}

}  // namespace

TEST_CASE("score modifications' coordinate plans equal the host form at every score") {
  unsigned seed = 0;
  score_modification_cases::for_each([](const auto&... c) { compare(c...); },
                                     [&](const auto& sizes, double lo, double hi) {
                                       return random_tensor(sizes, lo, hi, ++seed);
                                     });
}

/// The device form of modification f of the scores, with a learned input x.
template <class F, class X>
auto device_form(const F& f, const tensor<float, X, attn::cpu>& x_values) {
  attn::grad::variable<float, X, attn::cpu> x(tensor<float, X, attn::cpu>(x_values), true);
  return attn::cuda_backend::device_modification(attn::grad::detail::evaluate_modification<float, S, attn::cpu>(
      attn::grad::modify_scores(f, x), score_modification_cases::sizes(), true));
}

TEST_CASE("the fused kernels inline ALiBi's plans, not a soft cap's tanh and divisions") {
  // plan_cost.cuh's counts, by which fused_attention_tensor_cores.cuh inlines a modification or
  // calls it out of line: each node's cost, as the header lists them, added up by hand.
  namespace cuda = attn::cuda_backend;
  using attn::op::abs;
  using attn::op::subtract;
  const tensor<float, shape<H>, attn::cpu> per_head(extents<shape<H>>(3));
  const auto alibi = device_form(
      [](const auto& s, const auto& slopes) {
        return s - attn::broadcast_like(slopes, s) * attn::abs(attn::index_along<Q>(s, 2.0f) - attn::index_along<K>(s));
      },
      per_head);
  const auto soft_cap = device_form(
      [](const auto& s, const auto& cap) {
        return attn::broadcast_like(cap, s) * attn::tanh(s / attn::broadcast_like(cap, s));
      },
      per_head);
  using alibi_form = decltype(alibi);
  using soft_cap_form = decltype(soft_cap);
  // s − slope·|i − j|: a subtraction, a product, a load at one coordinate (2), an absolute value,
  // a subtraction and two iotas (2 each): 10. By s: the constant 1. The slope's gradient:
  // −(1·|i − j|) (negate, a product by a broadcast constant, abs, subtract, two iotas: 8), the
  // slope's offset (1) and a gradient's addition (3).
  CHECK(cuda::plan_cost<decltype(alibi.score)> == 10);
  CHECK(cuda::plan_cost<decltype(alibi.slope)> == 0);
  CHECK(cuda::plan_cost<decltype(alibi.inputs)> == 12);
  CHECK(alibi_form::cost == 22);
  CHECK(alibi_form::cost <= cuda::inlined_cost);
  CHECK(soft_cap_form::cost > cuda::inlined_cost);
  // What the header does not know is costly: an operation, a node.
  struct unknown_operation {};
  using plan = cuda::binary_plan<subtract, cuda::placeholder_plan<float>, cuda::constant_plan<float>>;
  CHECK(cuda::plan_cost<plan> == 1);
  CHECK(cuda::plan_cost<cuda::unary_plan<unknown_operation, plan>> == cuda::costly + 1);
  CHECK(cuda::plan_cost<cuda::unary_plan<abs, unknown_operation>> == 1 + cuda::costly);
}

TEST_CASE("a reshape's coordinate map divides the same in 32 bits as in 64") {
  // [B, H, Q, K] split out of [B, H, C]: the map from a score's coordinates to the operand's,
  // at every score, dividing by multiplying and dividing.
  using C = attn::dim<"c">;
  const tensor<float, shape<B, H, C>, attn::cpu> x(extents<shape<B, H, C>>(2, 3, 35));
  const auto split = attn::split<C, Q, K>(x, 5);
  static_assert(std::is_same_v<attn::shape_t<decltype(split)>, S>);
  const auto narrow = attn::cuda_backend::detail::operand_map(split);
  CHECK(narrow.narrow);
  auto wide = narrow;
  wide.narrow = false;
  int wrong = 0;
  for (index_t b = 0; b < 2; ++b)
    for (index_t h = 0; h < 3; ++h)
      for (index_t i = 0; i < 5; ++i)
        for (index_t j = 0; j < 7; ++j)
          for (const auto& map : {narrow, wide}) {
            const auto in = map(attn::cuda_backend::score_position{{b, h, i, j}});
            wrong += in.index[0] != b || in.index[1] != h || in.index[2] != i * 7 + j;
          }
  CHECK(wrong == 0);
}

TEST_CASE("a reshape that keeps its rank but not its sizes has no coordinate plan") {
  // Split, merge and rename cannot make one; the node's constructor can.
  const tensor<float, shape<H>, attn::cpu> x(extents<shape<H>>(3));
  const auto view = attn::as_operand(x);
  const attn::expr::reshape<shape<K>, decltype(view)> wider(view, extents<shape<K>>(6));
  CHECK_THROWS_AS(attn::cuda_backend::coordinate_plan(wider), std::invalid_argument);
  const attn::expr::reshape<shape<K>, decltype(view)> renamed(view, extents<shape<K>>(3));
  CHECK_NOTHROW(attn::cuda_backend::coordinate_plan(renamed));
}
