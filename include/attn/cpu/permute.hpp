// Permutations that keep the innermost dimension innermost, of data already in memory, copied
// a row at a time. Eigen's shuffle moves an element at a time, and the heads' split and merge
// (§3.2.2: [B, L, h·d_k] ↔ [B, h, L, d_k]) are such permutations, in every attention layer,
// forward and backward, and at every decoding step: the profile of beam search put a seventh
// of its time there (docs/benchmarks.md).
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "../expr/layout.hpp"
#include "threads.hpp"

namespace attn::cpu_backend::detail {

using attn::detail::as_view;
using attn::detail::is_viewable;

/// Whether E, under any reshapes (which keep the row-major order), is a permutation of a view
/// of T (or of a reshape of one) that keeps the innermost dimension innermost; `of(e)` is it.
template <class T, class E>
struct row_permutation {
  static constexpr bool matches = false;
};

template <class T, class To, class A>
struct row_permutation<T, expr::permute<To, A>> {
  static constexpr bool matches = is_viewable<A> && std::is_same_v<std::remove_const_t<typename A::value_type>, T> &&
                                  To::rank >= 2 &&
                                  expr::permute<To, A>::source_positions()[To::rank - 1] == To::rank - 1;
  static const expr::permute<To, A>& of(const expr::permute<To, A>& e) { return e; }
};

template <class T, class To, class A>
struct row_permutation<T, expr::reshape<To, A>> : row_permutation<T, A> {
  static const auto& of(const expr::reshape<To, A>& e) { return row_permutation<T, A>::of(e.a); }
};

/// Writes the permutation e into dst (contiguous, e's row-major order): a memcpy a row,
/// the rows split across threads when there are enough of them.
template <class T, class To, class A>
void copy_rows(T* dst, const expr::permute<To, A>& e) {
  constexpr std::size_t rank = To::rank;
  const auto source = as_view(e.a);
  const auto& from = source.extents().sizes();
  std::array<index_t, rank> from_strides{};
  from_strides[rank - 1] = 1;
  for (std::size_t i = rank - 1; i-- > 0;) from_strides[i] = from_strides[i + 1] * from[i + 1];
  // Sizes and source strides in the destination's order.
  constexpr auto positions = expr::permute<To, A>::source_positions();
  std::array<index_t, rank> sizes{}, strides{};
  for (std::size_t i = 0; i < rank; ++i) sizes[i] = from[positions[i]], strides[i] = from_strides[positions[i]];
  const index_t row = sizes[rank - 1];
  if (row == 0) return;
  const index_t rows = source.size() / row;
  const T* const data = source.data();
  parallel_for(rows, 1, std::max<index_t>(1, (index_t{1} << 15) / row), [&](index_t begin, index_t end) {
    for (index_t r = begin; r < end; ++r) {
      index_t rest = r, offset = 0;
      for (std::size_t i = rank - 1; i-- > 0;) {
        offset += rest % sizes[i] * strides[i];
        rest /= sizes[i];
      }
      std::memcpy(dst + r * row, data + offset, static_cast<std::size_t>(row) * sizeof(T));
    }
  });
}

}  // namespace attn::cpu_backend::detail
