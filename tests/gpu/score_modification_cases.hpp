// The score modifications that tests/gpu/score_modification_test.cu (on a GPU) and
// tests/unit/cuda/score_modification_test.cpp (on the CPU, after the emulator's header) compare
// in device form with the host form, at every score of a small [batch, heads, queries, keys]:
// through every node a coordinate plan has (broadcast, select, slice, permutes of two and three
// dimensions, rename, merge and split, iotas, constants).
#pragma once

#include <attn/expr.hpp>

#include <cstdint>

namespace score_modification_cases {

using B = attn::dim<"batch">;
using H = attn::dim<"heads">;
using Q = attn::dim<"queries">;
using K = attn::dim<"keys">;
using QK = attn::dim<"query_key">;
using Cap = attn::dim<"per_head">;
using S = attn::shape<B, H, Q, K>;

/// The sizes of the scores every case is evaluated at.
inline attn::extents<S> sizes() { return attn::extents<S>(2, 3, 5, 7); }

/// The given score of score `at` (its row-major index): a spread of values, positive and negative.
__host__ __device__ inline float given(std::int64_t at) { return 0.37f * float(at % 23) - 3.1f; }

/// compare(name, f, x) for each case: f(s, x) a modification of the scores s with a learned
/// input x, random(extents, lo, hi) x's values (a host tensor of floats).
template <class Compare, class Random>
void for_each(const Compare& compare, const Random& random) {
  using attn::extents;
  using attn::shape;
  const auto per_head = random(extents<shape<H>>(3), 0.2, 1.5);
  compare(
      "ALiBi, learned slopes",
      [](const auto& s, const auto& slopes) {
        return s - attn::broadcast_like(slopes, s) * attn::abs(attn::index_along<Q>(s, 2.0f) - attn::index_along<K>(s));
      },
      per_head);
  compare(
      "soft cap, learned caps",
      [](const auto& s, const auto& cap) {
        return attn::broadcast_like(cap, s) * attn::tanh(s / attn::broadcast_like(cap, s));
      },
      random(extents<shape<H>>(3), 2.0, 5.0));
  compare(
      "where(s > 0, s · a, s)",
      [](const auto& s, const auto& a) { return attn::where(s > 0.0f, s * attn::broadcast_like(a, s), s); }, per_head);
  // A relative-position table [keys + 2, heads]: keys 1 … 7 of it, heads first, over the scores.
  compare(
      "table through a slice and a permute",
      [](const auto& s, const auto& table) {
        return s + attn::broadcast_like(attn::permute<H, K>(attn::slice<K>(table, 1, 7)), s);
      },
      random(extents<shape<K, H>>(9, 3), -1.0, 1.0));
  // A rotation of three dimensions, which is not its own inverse as a swap of two is.
  compare(
      "table through a three-way permute",
      [](const auto& s, const auto& table) { return s - attn::broadcast_like(attn::permute<H, Q, K>(table), s); },
      random(extents<shape<K, H, Q>>(7, 3, 5), -1.0, 1.0));
  // The same rotation of a table that every key of a query reads alike (its element does not move
  // along the keys: the kernels may hold a query's shares of its gradient).
  compare(
      "a table of queries through a three-way permute",
      [](const auto& s, const auto& table) { return s + attn::broadcast_like(attn::permute<B, H, Q>(table), s); },
      random(extents<shape<Q, B, H>>(5, 2, 3), -1.0, 1.0));
  // A per-head table under another name: a reshape that passes the coordinates on.
  compare(
      "table through a rename",
      [](const auto& s, const auto& table) { return s + attn::broadcast_like(attn::rename<Cap, H>(table), s); },
      random(extents<shape<Cap>>(3), -1.0, 1.0));
  // A [queries, keys] table merged into one dimension and split back: two reshapes, each
  // through the row-major offset.
  compare(
      "table through a merge and a split",
      [](const auto& s, const auto& table) {
        return s * attn::broadcast_like(attn::split<QK, Q, K>(attn::merge<Q, K, QK>(table), 5), s);
      },
      random(extents<shape<Q, K>>(5, 7), -1.0, 1.0));
}

}  // namespace score_modification_cases
