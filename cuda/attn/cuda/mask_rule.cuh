// The device form of a fused attention mask rule (core/fused_attention.hpp): a rule the kernels
// can call as it is (every_pair, key_band, a callable of one's own whose call is __device__)
// passes through; a rule given as an expression (grad/fused_attention.hpp's pair_rule, which
// asks element_at on the host) becomes its coordinate plan (coordinate_plan.cuh), evaluated at
// the pair's coordinates (0, position, key), and gives the kernels its spans and whole-tile
// answers from the plan's bounds over blocks of pairs (plan_bounds.cuh), as pair_rule gives them
// from its expression's. Trivially copyable, naming no dimension (the kernel's template
// arguments: elementwise.cuh says why): a kernel parameter. No CUDA run-time: the emulator's
// tests build it too.
#pragma once

#include <cstdint>
#include <type_traits>

#include <attn/core.hpp>
#include <attn/expr.hpp>

#include "coordinate_plan.cuh"
#include "plan_bounds.cuh"

namespace attn::cuda_backend {

/// A rule given as an expression, on the device: its plan at (0, position, key), and the spans
/// and whole-tile answers of the plan's bounds over the positions and keys it covers.
template <class Plan>
struct device_pair_rule : spans_from_bounds<device_pair_rule<Plan>> {
  Plan allowed;

  __device__ bool operator()(index_t query, index_t key) const {  // query: its position
    return bool(allowed(position<3, std::int64_t>{{0, query, key}}));
  }
  __device__ value_bounds<bool> bounds(index_t first_position, index_t last_position, index_t first_key,
                                       index_t last_key) const {
    return plan_bounds(allowed, position<3, std::int64_t>{{0, first_position, first_key}},
                       position<3, std::int64_t>{{0, last_position, last_key}});
  }
};

/// The rule as the kernels take it: a pair_rule's plan (a rule with an expression `allowed()`),
/// else the rule itself.
template <class Rule>
auto device_rule(const Rule& rule) {
  if constexpr (requires { rule.allowed(); }) {
    auto plan = coordinate_plan(rule.allowed());
    static_assert(std::is_trivially_copyable_v<decltype(plan)>,
                  "attn::cuda: a mask rule's plan must be trivially copyable to be a kernel parameter");
    return device_pair_rule<decltype(plan)>{{rule.positions, rule.keys}, plan};
  } else {
    return rule;
  }
}

}  // namespace attn::cuda_backend
