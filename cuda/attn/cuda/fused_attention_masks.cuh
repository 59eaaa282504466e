// What the CUDA-core and tensor-core fused attention kernels share: which keys a query sees
// (core/fused_attention.hpp: padding, the causal rule, a variant's rule and a bias), and a
// score's coordinates and modification.
#pragma once

#include <attn/core.hpp>
#include <cstdint>

#include "position.cuh"

namespace attn::cuda_backend {

/// A score's coordinates (b, h, i, j) in [batch, heads, queries, keys].
using score_position = position<4, std::int64_t>;

/// No modification: the score is scale · q·k. A modification in device form
/// (score_modification.cuh's) has `modifies` true, operator()(at, s), derivative(at, s),
/// accumulate(at, s, d_score, gradients) and `size`, at a score's coordinates `at`.
struct no_score_modification {
  static constexpr bool modifies = false;
};

/// How many sums of a query's shares of M's learned inputs' gradients a dQ kernel holds (one an
/// input) and adds to memory once: where each input's element is the same along the query's keys
/// (device_score_modification::holds_along_keys: ALiBi's slope a head); 0 where there are none
/// or they cannot be held, and each share is added to memory at its score, a load and a store
/// that wait on the previous score's.
template <class M>
constexpr int held_inputs() {
  if constexpr (M::modifies) {
    if constexpr (M::holds_along_keys) return M::input_count;
  }
  return 0;
}

}  // namespace attn::cuda_backend

namespace attn::cuda_backend::fused_attention_kernels {

/// The end of the keys sentence b's queries may see (padding at the end), before the causal rule.
__device__ inline index_t key_end_of(const fused_attention_problem& p, index_t b) {
  return p.key_lengths ? (p.key_lengths[b] < p.keys ? p.key_lengths[b] : p.keys) : p.keys;
}

/// The end of the keys that the block of `rows` queries from index `first` may see: up to the
/// last one's position when causal.
__device__ inline index_t keys_seen(const fused_attention_problem& p, index_t first, index_t rows, index_t key_end) {
  if (!p.causal) return key_end;
  const index_t last = (first + rows < p.queries ? first + rows : p.queries) - 1;
  const index_t end = p.first_query + last + 1;
  return key_end < end ? key_end : end;
}

/// The first query (an index) that may see key `first_key` or a later one: under the causal
/// rule, queries before that key's position see none of them.
__device__ inline index_t first_query_seeing(const fused_attention_problem& p, index_t first_key) {
  return p.causal && first_key > p.first_query ? first_key - p.first_query : 0;
}

/// The keys [begin, end) that some query of the block from index `first`, `rows` of them, may
/// see: before the sentence's end, the causal diagonal and the rule's span's end, from the
/// rule's span's beginning rounded down to a multiple of `tile` (the tiles then start where
/// they would without the rule: the same sums, in the same order, for the keys both walk).
template <class Rule>
__device__ inline index_span keys_seen(const fused_attention_problem& p, index_t first, index_t rows, index_t key_end,
                                       const Rule& rule, index_t tile) {
  const index_t last = (first + rows < p.queries ? first + rows : p.queries) - 1;
  const index_span allowed = rule_keys_seen(rule, p.first_query + first, p.first_query + last);
  const index_t end = keys_seen(p, first, rows, key_end);
  const index_t begin = allowed.begin > 0 ? allowed.begin - allowed.begin % tile : 0;
  return {begin, allowed.end < end ? allowed.end : end};
}

/// The queries [begin, end) (indices) that may see a key of first_key … first_key + rows − 1:
/// from the causal diagonal and the rule's span's beginning, rounded down to a multiple of
/// `tile`, to the rule's span's end.
template <class Rule>
__device__ inline index_span queries_seeing(const fused_attention_problem& p, index_t first_key, index_t rows,
                                            const Rule& rule, index_t tile) {
  const index_t last_key = (first_key + rows < p.keys ? first_key + rows : p.keys) - 1;
  const index_span allowed = rule_positions_seeing(rule, first_key, last_key);
  const index_t first_allowed = allowed.begin - p.first_query, end_allowed = allowed.end - p.first_query;
  const index_t causal_begin = first_query_seeing(p, first_key);
  const index_t begin = first_allowed > causal_begin ? first_allowed : causal_begin;
  return {begin - begin % tile, end_allowed < p.queries ? end_allowed : p.queries};
}

/// Whether the rule and the bias let query i (an index; its position is first_query + i) see
/// key j: the masks that vary pair by pair.
template <class T, class Rule>
__device__ inline bool rule_and_bias_allow(const fused_attention_problem& p, index_t b, index_t i, index_t j,
                                           const T* bias, const Rule& rule) {
  return rule(p.first_query + i, j) &&
         (!bias || accumulate_t<T>(bias[(b * p.queries + i) * p.keys + j]) > accumulate_t<T>(hidden_bias));
}

/// Whether query i sees key j: padding, the causal rule, the rule and the bias.
template <class T, class Rule>
__device__ inline bool visible(const fused_attention_problem& p, index_t b, index_t i, index_t j, index_t key_end,
                               const T* bias, const Rule& rule) {
  return j < key_end && (!p.causal || j <= p.first_query + i) && rule_and_bias_allow(p, b, i, j, bias, rule);
}

/// Columns [begin, end) of a tile: the pairs of a row that its row's masks leave.
struct column_span {
  int begin, end;
};

/// Where head h of sentence b finds its rows, and those of the key/value head it reads.
struct heads_of {
  index_t query_row;  // first row of (b, h) in [batch · heads · queries]: log_sum_exp's, the row terms'
  head_rows q, out;   // (b, h)'s rows in q (and dQ) and out (and dO)
  head_rows k, v;     // (b, h / group)'s in k (and dK) and v (and dV)
  __device__ heads_of(const fused_attention_problem& p, index_t b, index_t h)
      : query_row((b * p.heads + h) * p.queries),
        q(p.q_rows(b, h)),
        out(p.out_rows(b, h)),
        k(p.k_rows(b, h / (p.heads / p.kv_heads))),
        v(p.v_rows(b, h / (p.heads / p.kv_heads))) {}
};

/// scale · q·k modified (no_score_modification: unchanged).
template <class A, class M>
__device__ inline A modified(const M& m, index_t b, index_t h, index_t i, index_t j, A scaled) {
  if constexpr (M::modifies) return m(score_position{{b, h, i, j}}, scaled);
  else return scaled;
}

}  // namespace attn::cuda_backend::fused_attention_kernels
