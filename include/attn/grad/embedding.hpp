// Embedding lookup (paper §3.4): the rows of a [vocab, d_model] table for a batch of token
// ids, multiplied by a scale (√d_model in the paper).
#pragma once

#include <cstdint>

#include "../core/primitives.hpp"
#include "variable.hpp"

namespace attn::grad {

/// y[b, l, :] = table[ids[b, l], :] · scale. The gradient adds dy's rows back into the rows
/// of the table they came from.
template <class T, class Vocab, class Width, class B, class L, class Id, class Device>
variable<T, shape<B, L, Width>, Device> lookup(tape* t, const variable<T, shape<Vocab, Width>, Device>& table,
                                               const tensor<Id, shape<B, L>, Device>& ids,
                                               std::type_identity_t<accumulate_t<T>> scale) {
  using Y = shape<B, L, Width>;
  const index_t width = table.extents().template extent<Width>();
  const index_t rows = table.extents().template extent<Vocab>();
  tensor<T, Y, Device> out(gather_extents<Y>(ids.extents(), table.extents()), uninitialized);
  primitives<Device>::gather_rows(out.data(), table.value().data(), rows, width, ids.data(), ids.size(), scale);
  variable<T, Y, Device> y(std::move(out), recording(t, table));
  if (y.requires_grad()) {
    t->record([table = table.without_value(), y = y.without_value(), ids = tensor<Id, shape<B, L>, Device>(ids), scale,
               width] {
      if (!y.has_grad()) return;
      // The table's gradient is dense: zero rows that no token touched.
      if (!table.has_grad()) table.accumulate(fill<T, Device>(table.extents(), T{0}));
      auto& grad = table.grad();
      primitives<Device>::scatter_add_rows(grad.data(), width, y.grad().data(), ids.data(), ids.size(), scale);
    });
  }
  return y;
}

}  // namespace attn::grad

namespace attn::grad {

/// Rows first … first + count − 1 of a table [Rows, Width], as [L, Width]: learned position
/// embeddings for a sequence of length count that starts at position `first`. The gradient
/// goes back into those rows.
template <class L, class T, class Rows, class Width, class Device>
variable<T, shape<L, Width>, Device> table_rows(tape* t, const variable<T, shape<Rows, Width>, Device>& table,
                                                index_t first, index_t count) {
  const index_t rows = table.extents().template extent<Rows>();
  if (first < 0 || count < 0 || first + count > rows)
    throw extent_error("attn::grad::table_rows", Rows::name,
                       "has extent " + std::to_string(rows) + ", too small for positions [" + std::to_string(first) +
                           ", " + std::to_string(first + count) + ")");
  const extents<shape<L, Width>> sizes = gather_extents<shape<L, Width>>(extents<shape<L>>(count), table.extents());
  const index_t offset = first * table.extents().template extent<Width>();
  variable<T, shape<L, Width>, Device> y(
      tensor_view<const T, shape<L, Width>, Device>(table.value().data() + offset, sizes), recording(t, table));
  if (y.requires_grad()) {
    t->record([table = table.without_value(), y = y.without_value(), offset] {
      if (!y.has_grad()) return;
      if (!table.has_grad()) table.accumulate(fill<T, Device>(table.extents(), T{0}));
      const tensor_view<T, shape<L, Width>, Device> rows_of(table.grad().data() + offset, y.extents());
      rows_of = rows_of + y.grad();
    });
  }
  return y;
}

/// The first `count` rows of a table: positions 0 … count − 1.
template <class L, class T, class Rows, class Width, class Device>
variable<T, shape<L, Width>, Device> leading_rows(tape* t, const variable<T, shape<Rows, Width>, Device>& table,
                                                  index_t count) {
  return table_rows<L>(t, table, 0, count);
}

}  // namespace attn::grad
