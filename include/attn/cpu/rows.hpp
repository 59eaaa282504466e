// Row gathers and scatters by index (embedding lookups and their gradients), and random
// masks: loops that are not elementwise expressions, threaded with the backend's OpenMP.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "../core/error.hpp"
#include "../core/random.hpp"
#include "threads.hpp"

namespace attn::cpu_backend {

/// out[i, :] = table[ids[i], :] · scale for i < count; every id must lie in [0, rows).
template <class T, class Id>
void gather_rows(T* out, const T* table, index_t rows, index_t width, const Id* ids, index_t count, T scale) {
  for (index_t i = 0; i < count; ++i) {
    if (ids[i] < 0 || ids[i] >= rows)
      throw extent_error("attn::embedding", "vocab",
                         "has extent " + std::to_string(rows) + ", but token id " + std::to_string(ids[i]) +
                             " was given at position " + std::to_string(i));
  }
  parallel_for(count, 1, std::max<index_t>(1, 4096 / std::max<index_t>(1, width)), [&](index_t begin, index_t end) {
    for (index_t i = begin; i < end; ++i) {
      const T* from = table + static_cast<index_t>(ids[i]) * width;
      T* to = out + i * width;
      for (index_t c = 0; c < width; ++c) to[c] = from[c] * scale;
    }
  });
}

/// out[i, :] = in[keep[i], :] for i < count: the rows that go on, in their new order (beam
/// search keeps some hypotheses, drops others and copies the best).
template <class T>
void select_rows(T* out, const T* in, index_t rows, index_t width, const index_t* keep, index_t count) {
  for (index_t i = 0; i < count; ++i) {
    if (keep[i] < 0 || keep[i] >= rows)
      throw extent_error("attn::select_rows", "rows",
                         "has extent " + std::to_string(rows) + ", but row " + std::to_string(keep[i]) + " was kept");
  }
  parallel_for(count, 1, std::max<index_t>(1, 4096 / std::max<index_t>(1, width)), [&](index_t begin, index_t end) {
    for (index_t i = begin; i < end; ++i) std::copy_n(in + keep[i] * width, width, out + i * width);
  });
}

/// Copies `count` blocks of `block` elements from every `from_stride`-th element of `from` to
/// every `to_stride`-th of `to`: writing one position into a [rows, heads, capacity, depth] cache.
template <class T>
void copy_blocks(T* to, index_t to_stride, const T* from, index_t from_stride, index_t block, index_t count) {
  for (index_t i = 0; i < count; ++i) std::copy_n(from + i * from_stride, block, to + i * to_stride);
}

/// table[ids[i], :] += rows_in[i, :] · scale. Threads split the columns, so no two threads
/// ever add to the same element and the sums do not depend on the thread count.
template <class T, class Id>
void scatter_add_rows(T* table, index_t width, const T* rows_in, const Id* ids, index_t count, T scale) {
  parallel_for(width, 16, 64, [&](index_t begin, index_t end) {
    for (index_t i = 0; i < count; ++i) {
      T* to = table + static_cast<index_t>(ids[i]) * width;
      const T* from = rows_in + i * width;
      for (index_t c = begin; c < end; ++c) to[c] += from[c] * scale;
    }
  });
}

/// mask[i] = keep / (1 − p) with keep = (uniform ≥ p), from numbers start, start + 1, … of
/// the stream: inverted dropout, whose expected value is 1.
template <class T>
void dropout_mask(T* mask, index_t count, double p, const random_stream& stream, std::uint64_t start) {
  const T kept = static_cast<T>(1.0 / (1.0 - p));
  parallel_for(count, 64, 4096, [&](index_t begin, index_t end) {
    for (index_t i = begin; i < end; ++i)
      mask[i] = stream.uniform(start + static_cast<std::uint64_t>(i)) >= p ? kept : T{0};
  });
}

}  // namespace attn::cpu_backend
