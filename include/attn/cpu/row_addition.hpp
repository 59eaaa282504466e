// One vector added to every row of a matrix: a linear layer's bias after its product (§3.3's
// x·W + b, with ReLU for the feed-forward's first layer) and the positional encodings added to
// every sentence of a batch (§3.5). A plain loop over rows, which the compiler vectorises:
// Eigen's broadcast recomputes the vector's index for every packet (five times as long in
// float), and for 16-bit numbers converts an element at a time.
#pragma once

#include <algorithm>

#include "../core/config.hpp"
#include "conversions.hpp"
#include "threads.hpp"

namespace attn::cpu_backend {

/// out[r, :] = in[r, :] + v, then ReLU's max(·, 0) when `Relu`, for every row r of [rows, width];
/// `out` may be `in`. The ReLU keeps a NaN, as std::max(x, 0) does.
template <bool Relu, class T>
  requires(!is_float16_storage<T>)  // 16-bit numbers: the overload below, in float
void add_to_rows(T* out, const T* in, const T* v, index_t rows, index_t width) {
  // Rows of at least ~32k numbers a thread: below that a fork-join costs more than it saves.
  parallel_for(rows, 1, std::max<index_t>(1, (index_t{1} << 15) / std::max<index_t>(1, width)),
               [&](index_t begin, index_t end) {
                 for (index_t r = begin; r < end; ++r) {
                   T* row = out + r * width;
                   const T* from = in + r * width;
                   for (index_t j = 0; j < width; ++j) {
                     const T x = from[j] + v[j];
                     row[j] = Relu ? (x < T(0) ? T(0) : x) : x;
                   }
                 }
               });
}

/// The same for 16-bit `out` and `v`, with `in` already in float (`wide`, which is overwritten):
/// the sums in float, each rounded once, as Eigen's road computes them.
template <bool Relu, class T>
  requires is_float16_storage<T>
void add_to_rows(T* out, float* wide, const T* v, index_t rows, index_t width) {
  const auto wide_v = conversions::widened(v, width);
  add_to_rows<Relu>(wide, wide, wide_v.data(), rows, width);
  conversions::narrow(out, wide, rows * width);
}

}  // namespace attn::cpu_backend
