// Softmax along one dimension, with the scale and additive mask of attention (paper §3.2.1).
#pragma once

#include <array>

#include "../core/primitives.hpp"
#include "../expr/broadcast.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"
#include "variable.hpp"

namespace attn::grad {

namespace detail {

/// Where a bias of shape B sits under x of shape S, for softmax along S's last dimension run
/// as rows (the device's softmax_rows): B has that dimension last and S's other dimensions in
/// S's order with at most one run of them left out, so that B's rows repeat under x's in
/// blocks (core/primitives.hpp, repeated_rows). `fits` is false for any other B.
template <class S, class B>
struct rows_under {
  static constexpr std::size_t rank = S::rank;

  template <class... Bs>
  static constexpr std::array<bool, rank> present_in(meta::list<Bs...>) {
    std::array<bool, rank> present{};
    ((present[dim_index<S, Bs>] = true), ...);
    return present;
  }
  template <class... Bs>
  static constexpr bool in_order(meta::list<Bs...>) {
    if constexpr (!(has_dim<S, Bs> && ...)) {
      return false;
    } else {
      const std::array<std::size_t, sizeof...(Bs)> at{dim_index<S, Bs>...};
      for (std::size_t i = 1; i < at.size(); ++i)
        if (at[i] <= at[i - 1]) return false;
      return true;
    }
  }
  static constexpr bool fits_shape() {
    if (!in_order(typename B::dims{})) return false;
    const auto present = present_in(typename B::dims{});
    if (!present[rank - 1]) return false;
    std::size_t i = 0;  // present*, absent*, present* over x's leading dimensions
    while (i + 1 < rank && present[i]) ++i;
    while (i + 1 < rank && !present[i]) ++i;
    while (i + 1 < rank && present[i]) ++i;
    return i + 1 == rank;
  }
  static constexpr bool fits = rank > 0 && B::rank > 0 && fits_shape();

  /// The repeat of B's rows under x's, from x's extents.
  template <class T>
  static repeated_rows<T> of(const T* data, const attn::extents<S>& sizes) {
    const auto present = present_in(typename B::dims{});
    repeated_rows<T> rows{data, 1, 1};
    std::size_t i = rank - 1;  // back to front: the trailing run present, then the run missing
    while (i > 0 && present[i - 1]) rows.inner *= sizes[--i];
    while (i > 0 && !present[i - 1]) rows.repeat *= sizes[--i];
    return rows;
  }
};

/// Softmax along D runs as the device's row primitive when D is x's innermost dimension.
template <class D, class S>
inline constexpr bool softmax_along_rows = S::rank > 0 && std::same_as<D, dim_at<S, S::rank - 1>>;

/// y = softmax_D(y) in place, one row at a time: exp(y − max) / Σ exp(y − max).
template <class D, class T, class S, class Device>
void softmax_in_place(tensor<T, S, Device>& y) {
  const auto row_max = eval(max<D>(y));
  y = exp(y - broadcast_like(row_max, y));
  const auto row_sum = eval(sum<D>(y));
  y = y * broadcast_like(T{1} / row_sum, y);
}

template <class D, class T, class S, class Device>
void record_softmax(tape* t, const variable<T, S, Device>& x, const variable<T, S, Device>& y, accumulate_t<T> scale) {
  // dx = scale · y ⊙ (dy − Σ_D dy ⊙ y)
  t->record([x = x.without_value(), y, scale] {
    if (!y.has_grad() || !x.requires_grad()) return;
    const auto& dy = y.grad();
    if constexpr (softmax_along_rows<D, S>) {
      const index_t width = x.extents().template extent<D>();
      const index_t rows = width == 0 ? 0 : x.extents().size() / width;
      x.accumulate_with([&](T* dx, bool add) {
        primitives<Device>::softmax_rows_backward(dx, add, y.value().data(), dy.data(), rows, width, scale);
      });
    } else {
      const auto dot = eval(sum<D>(dy * y.value()));
      x.accumulate((dy - broadcast_like(dot, dy)) * y.value() * scale);
    }
  });
}

/// softmax along D of x · scale (+ bias): one launch of the device's row primitive when D is
/// innermost and the bias's rows repeat under x's, else the expressions. The scale is of the
/// compute type (float for 16-bit x: 1/√d_k is rarely a 16-bit number).
template <class D, class T, class S, class Device, class BiasShape>
variable<T, S, Device> softmax(tape* t, const variable<T, S, Device>& x, accumulate_t<T> scale,
                               const tensor<T, BiasShape, Device>* bias) {
  static_assert(meta::is_subsequence<typename BiasShape::dims, typename S::dims>,
                "attn::grad::softmax: the bias's dimensions must appear in the scores' shape, in the same order");
  if constexpr (softmax_along_rows<D, S> && rows_under<S, BiasShape>::fits) {
    const index_t width = x.extents().template extent<D>();
    const index_t rows = width == 0 ? 0 : x.extents().size() / width;
    if (bias) check_common_extents("attn::grad::softmax", bias->extents(), x.extents());
    variable<T, S, Device> y(tensor<T, S, Device>(x.extents(), uninitialized), recording(t, x));
    primitives<Device>::softmax_rows(y.value().data(), x.value().data(), rows, width, scale,
                                     bias ? rows_under<S, BiasShape>::of(bias->data(), x.extents())
                                          : repeated_rows<T>{});
    if (y.requires_grad()) record_softmax<D>(t, x, y, scale);
    return y;
  } else {
    variable<T, S, Device> y(bias ? tensor<T, S, Device>(x.value() * scale + broadcast_like(*bias, x.value()))
                                  : tensor<T, S, Device>(x.value() * scale),
                             recording(t, x));
    softmax_in_place<D>(y.value());
    if (y.requires_grad()) record_softmax<D>(t, x, y, scale);
    return y;
  }
}

}  // namespace detail

/// softmax along D of x · scale.
template <dimension D, class T, class S, class Device>
variable<T, S, Device> softmax(tape* t, const variable<T, S, Device>& x, std::type_identity_t<accumulate_t<T>> scale = 1) {
  return detail::softmax<D, T, S, Device, S>(t, x, scale, nullptr);
}

/// softmax along D of x · scale + bias, the bias repeated over x's other dimensions: a mask
/// that is 0 where attention may look and a large negative number where it may not.
template <dimension D, class T, class S, class Device, class BiasShape>
variable<T, S, Device> softmax(tape* t, const variable<T, S, Device>& x, std::type_identity_t<accumulate_t<T>> scale,
                               const tensor<T, BiasShape, Device>& bias) {
  return detail::softmax<D>(t, x, scale, &bias);
}

}  // namespace attn::grad
