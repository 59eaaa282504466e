// The CPU's device primitives (core/primitives.hpp): loops over rows that are not elementwise
// expressions, threaded with the backend's OpenMP, rows vectorised through Eigen. The 16-bit
// types widen their inputs to float, run the float loops and round each output once (the CPU
// has no 16-bit arithmetic worth the name: this is the reference, not a fast path).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/primitives.hpp"
#include "conversions.hpp"
#include "eigen.hpp"
#include "threads.hpp"
#include "vector_math.hpp"

namespace attn {

template <>
struct primitives<cpu> {
  /// out[i, :] = table[ids[i], :] · scale for i < count; every id must lie in [0, rows).
  template <class T, class Id>
  static void gather_rows(T* out, const T* table, index_t rows, index_t width, const Id* ids, index_t count,
                          accumulate_t<T> scale) {
    using A = accumulate_t<T>;
    for (index_t i = 0; i < count; ++i) {
      if (ids[i] < 0 || ids[i] >= rows)
        throw extent_error("attn::embedding", "vocab",
                           "has extent " + std::to_string(rows) + ", but token id " + std::to_string(ids[i]) +
                               " was given at position " + std::to_string(i));
    }
    cpu_backend::parallel_for(count, 1, rows_per_piece(width), [&](index_t begin, index_t end) {
      for (index_t i = begin; i < end; ++i) {
        const T* from = table + static_cast<index_t>(ids[i]) * width;
        T* to = out + i * width;
        for (index_t c = 0; c < width; ++c) to[c] = T(A(from[c]) * scale);
      }
    });
  }

  /// table[ids[i], :] += rows_in[i, :] · scale. Threads split the columns, so no two threads
  /// ever add to the same element and the sums do not depend on the thread count. 16-bit
  /// tables gather each row's additions in float, in position order, and round once.
  template <class T, class Id>
  static void scatter_add_rows(T* table, index_t width, const T* rows_in, const Id* ids, index_t count,
                               accumulate_t<T> scale) {
    if constexpr (is_float16_storage<T>) {
      std::vector<index_t> order(static_cast<std::size_t>(count));
      for (index_t i = 0; i < count; ++i) order[std::size_t(i)] = i;
      std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) { return ids[a] < ids[b]; });
      cpu_backend::parallel_for(width, 16, 64, [&](index_t begin, index_t end) {
        for (std::size_t first = 0; first < order.size();) {
          std::size_t last = first;
          while (last < order.size() && ids[order[last]] == ids[order[first]]) ++last;
          T* to = table + static_cast<index_t>(ids[order[first]]) * width;
          for (index_t c = begin; c < end; ++c) {
            float sum = float(to[c]);
            for (std::size_t j = first; j < last; ++j) sum += float(rows_in[order[j] * width + c]) * scale;
            to[c] = T(sum);
          }
          first = last;
        }
      });
    } else {
      cpu_backend::parallel_for(width, 16, 64, [&](index_t begin, index_t end) {
        for (index_t i = 0; i < count; ++i) {
          T* to = table + static_cast<index_t>(ids[i]) * width;
          const T* from = rows_in + i * width;
          for (index_t c = begin; c < end; ++c) to[c] += from[c] * scale;
        }
      });
    }
  }

  /// out[i, :] = in[keep[i], :] for i < count: the rows that go on, in their new order (beam
  /// search keeps some hypotheses, drops others and copies the best).
  template <class T>
  static void select_rows(T* out, const T* in, index_t rows, index_t width, const index_t* keep, index_t count) {
    check_rows(keep, count, rows);
    cpu_backend::parallel_for(count, 1, rows_per_piece(width), [&](index_t begin, index_t end) {
      for (index_t i = begin; i < end; ++i) std::copy_n(in + keep[i] * width, width, out + i * width);
    });
  }

  /// Copies `count` blocks of `block` elements from every `from_stride`-th element of `from` to
  /// every `to_stride`-th of `to` (block i from block sources[i] when given): a decoding cache
  /// [rows, heads, positions, depth] made one position longer, its rows in a new order.
  template <class T>
  static void copy_blocks(T* to, index_t to_stride, const T* from, index_t from_stride, index_t block, index_t count,
                          const index_t* sources = nullptr) {
    // Shared by the threads from 64 KiB each: beam search's caches copy megabytes a step.
    const index_t blocks_per_thread = std::max<index_t>(1, index_t(65536 / sizeof(T)) / std::max<index_t>(block, 1));
    cpu_backend::parallel_for(count, 1, blocks_per_thread, [&](index_t begin, index_t end) {
      for (index_t i = begin; i < end; ++i)
        std::copy_n(from + (sources ? sources[i] : i) * from_stride, block, to + i * to_stride);
    });
  }

  /// bias[b, q, k] = masked where key k of sentence b is padding (or lies after q, causal).
  template <class T, class Id>
  static void attention_mask(T* bias, const Id* key_ids, index_t sentences, index_t queries, index_t keys, Id pad,
                             bool causal, T masked) {
    for (index_t b = 0; b < sentences; ++b)
      for (index_t q = 0; q < queries; ++q) {
        T* row = bias + (b * queries + q) * keys;
        const Id* ids = key_ids + b * keys;
        for (index_t k = 0; k < keys; ++k) row[k] = (ids[k] == pad || (causal && k > q)) ? masked : T{0};
      }
  }

  /// The label-smoothed cross-entropy of every row (core/primitives.hpp): one pass over each
  /// row for its maximum, one writing exp(x − max) and summing it, one scaling to softmax.
  template <class T, class Id>
  static cross_entropy_totals cross_entropy(const T* logits, const Id* targets, index_t rows, index_t classes,
                                            double smoothing, Id pad, accumulate_t<T>* probabilities,
                                            accumulate_t<T>* weight) {
    if constexpr (is_float16_storage<T>) {
      const auto wide = widen(logits, rows * classes);
      return cross_entropy(wide.data(), targets, rows, classes, smoothing, pad, probabilities, weight);
    } else {
      for (index_t r = 0; r < rows; ++r) {
        if (targets[r] != pad && (targets[r] < 0 || targets[r] >= classes))
          throw unknown_target(classes, static_cast<long long>(targets[r]), r);
      }
      using row_array = Eigen::Array<T, 1, Eigen::Dynamic>;
      std::vector<double> nll(static_cast<std::size_t>(rows)), smoothed(static_cast<std::size_t>(rows));
      cpu_backend::parallel_for(rows, 1, std::max<index_t>(1, 16384 / std::max<index_t>(1, classes)),
                                [&](index_t begin, index_t end) {
                                  for (index_t r = begin; r < end; ++r) {
                                    const Eigen::Map<const row_array> x(logits + r * classes, classes);
                                    Eigen::Map<row_array> p(probabilities + r * classes, classes);
                                    const T row_max = x.maxCoeff();
                                    p = x - row_max;
                                    const T total = exp_and_sum(p.data(), classes);
                                    p *= T{1} / total;
                                    const auto at = static_cast<std::size_t>(r);
                                    if (targets[r] == pad) {
                                      weight[r] = T{0};
                                      nll[at] = smoothed[at] = 0;
                                      continue;
                                    }
                                    weight[r] = T{1};
                                    const double log_sum = std::log(double(total)) + double(row_max);
                                    const double log_p_target = double(x[static_cast<index_t>(targets[r])]) - log_sum;
                                    const double mean_log_p = double(x.sum()) / double(classes) - log_sum;
                                    nll[at] = -log_p_target;
                                    smoothed[at] = -((1.0 - smoothing) * log_p_target + smoothing * mean_log_p);
                                  }
                                });
      cross_entropy_totals totals;
      for (index_t r = 0; r < rows; ++r) {  // in row order: the same sums for any thread count
        totals.nll += nll[static_cast<std::size_t>(r)];
        totals.smoothed += smoothed[static_cast<std::size_t>(r)];
        totals.tokens += targets[r] != pad;
      }
      return totals;
    }
  }

  /// gradient = (p − q) · weight · scale, q = (1 − ε)·onehot(target) + ε/classes; in place over
  /// the probabilities when they are the gradient's own memory (T = A).
  template <class T, class Id>
  static void cross_entropy_backward(T* gradient, const accumulate_t<T>* probabilities, const Id* targets,
                                     const accumulate_t<T>* weight, index_t rows, index_t classes, double smoothing,
                                     accumulate_t<T> scale) {
    using A = accumulate_t<T>;
    using row_array = Eigen::Array<A, 1, Eigen::Dynamic>;
    const A uniform_share = A(smoothing / double(classes));
    cpu_backend::parallel_for(rows, 1, std::max<index_t>(1, 16384 / std::max<index_t>(1, classes)),
                              [&](index_t begin, index_t end) {
                                for (index_t r = begin; r < end; ++r) {
                                  const A row_scale = weight[r] * scale;
                                  const index_t target = static_cast<index_t>(targets[r]);
                                  if constexpr (std::is_same_v<T, A>) {
                                    Eigen::Map<row_array> g(gradient + r * classes, classes);
                                    if (row_scale == A{0}) {
                                      g.setZero();
                                      continue;
                                    }
                                    g = (Eigen::Map<const row_array>(probabilities + r * classes, classes) - uniform_share) *
                                        row_scale;
                                    g[target] -= A(1.0 - smoothing) * row_scale;
                                  } else {  // each element computed in float and rounded once
                                    const A* p = probabilities + r * classes;
                                    T* g = gradient + r * classes;
                                    for (index_t c = 0; c < classes; ++c) {
                                      A value = row_scale == A{0} ? A{0} : (p[c] - uniform_share) * row_scale;
                                      if (c == target && row_scale != A{0}) value -= A(1.0 - smoothing) * row_scale;
                                      g[c] = T(value);
                                    }
                                  }
                                }
                              });
  }

  /// out = softmax(in · scale + bias) along each row: the row written, its maximum subtracted
  /// for range, exponentiated, summed and scaled, while it is in the cache (paper §3.2.1).
  template <class T>
  static void softmax_rows(T* out, const T* in, index_t rows, index_t width, accumulate_t<T> scale,
                           repeated_rows<T> bias) {
    if (width == 0) return;
    if constexpr (is_float16_storage<T>) {
      const auto x = widen(in, rows * width);
      const auto b = widen(bias.data, bias.data ? bias_rows(bias, rows) * width : 0);
      std::vector<float> y(x.size());
      softmax_rows(y.data(), x.data(), rows, width, scale,
                   repeated_rows<float>{bias.data ? b.data() : nullptr, bias.inner, bias.repeat});
      narrow(out, y);
    } else {
      using row_array = Eigen::Array<T, 1, Eigen::Dynamic>;
      cpu_backend::parallel_for(rows, 1, rows_per_piece(width), [&](index_t begin, index_t end) {
        for (index_t r = begin; r < end; ++r) {
          Eigen::Map<row_array> y(out + r * width, width);
          y = Eigen::Map<const row_array>(in + r * width, width) * scale;
          if (bias.data) y += Eigen::Map<const row_array>(bias.data + bias.row(r) * width, width);
          y -= y.maxCoeff();
          y *= T{1} / exp_and_sum(y.data(), width);
        }
      });
    }
  }

  /// out = x − max − log Σ exp(x − max) along each row x of `in`: next-token log-probabilities
  /// in three passes over a row while it is in the cache (max, sum, out), in accumulate_t<T>.
  template <class T>
  static void log_softmax_rows(accumulate_t<T>* out, const T* in, index_t rows, index_t width) {
    if (width == 0) return;
    if constexpr (is_float16_storage<T>) {
      const auto x = widen(in, rows * width);
      log_softmax_rows(out, x.data(), rows, width);
    } else if constexpr (std::is_same_v<T, float>) {
      cpu_backend::parallel_for(rows, 1, rows_per_piece(width), [&](index_t begin, index_t end) {
        for (index_t r = begin; r < end; ++r) {
          const float* x = in + r * width;
          const float largest = Eigen::Map<const Eigen::Array<float, 1, Eigen::Dynamic>>(x, width).maxCoeff();
          cpu_backend::vector_math::log_softmax(out + r * width, x, width, largest);
        }
      });
    } else {
      using row_array = Eigen::Array<T, 1, Eigen::Dynamic>;
      cpu_backend::parallel_for(rows, 1, rows_per_piece(width), [&](index_t begin, index_t end) {
        for (index_t r = begin; r < end; ++r) {
          const Eigen::Map<const row_array> x(in + r * width, width);
          Eigen::Map<row_array> y(out + r * width, width);
          y = x - x.maxCoeff();
          y -= std::log(y.exp().sum());
        }
      });
    }
  }

  /// dx (+)= scale · y ⊙ (dy − Σ dy ⊙ y) along each row.
  template <class T>
  static void softmax_rows_backward(T* dx, bool add, const T* y, const T* dy, index_t rows, index_t width,
                                    accumulate_t<T> scale) {
    if constexpr (is_float16_storage<T>) {
      const index_t n = rows * width;
      auto wide_dx = add ? widen(dx, n) : std::vector<float>(std::size_t(n));
      softmax_rows_backward(wide_dx.data(), add, widen(y, n).data(), widen(dy, n).data(), rows, width, scale);
      narrow(dx, wide_dx);
    } else {
      using row_array = Eigen::Array<T, 1, Eigen::Dynamic>;
      cpu_backend::parallel_for(rows, 1, rows_per_piece(width), [&](index_t begin, index_t end) {
        for (index_t r = begin; r < end; ++r) {
          const Eigen::Map<const row_array> y_row(y + r * width, width), dy_row(dy + r * width, width);
          Eigen::Map<row_array> dx_row(dx + r * width, width);
          const T dot = (dy_row * y_row).sum();
          if (add) dx_row += (dy_row - dot) * y_row * scale;
          else dx_row = (dy_row - dot) * y_row * scale;
        }
      });
    }
  }

  /// out = (in − mean) · rstd · gain + bias along each row (Ba et al., 2016; paper §3.1); the
  /// variance from the centred row (two passes), as the expression it replaces computed it.
  template <class T>
  static void layer_norm_rows(T* out, accumulate_t<T>* row_mean, accumulate_t<T>* row_rstd, const T* in,
                              const T* gain, const T* bias, index_t rows, index_t width, accumulate_t<T> epsilon) {
    if constexpr (is_float16_storage<T>) {
      std::vector<float> y(std::size_t(rows * width));
      layer_norm_rows(y.data(), row_mean, row_rstd, widen(in, rows * width).data(), widen(gain, width).data(),
                      widen(bias, width).data(), rows, width, epsilon);
      narrow(out, y);
    } else {
      using row_array = Eigen::Array<T, 1, Eigen::Dynamic>;
      const Eigen::Map<const row_array> g(gain, width), b(bias, width);
      cpu_backend::parallel_for(rows, 1, rows_per_piece(width), [&](index_t begin, index_t end) {
        for (index_t r = begin; r < end; ++r) {
          const Eigen::Map<const row_array> x(in + r * width, width);
          Eigen::Map<row_array> y(out + r * width, width);
          const T mean = x.sum() / T(width);
          y = x - mean;
          const T rstd = T{1} / std::sqrt(y.square().sum() / T(width) + epsilon);
          y = y * rstd * g + b;
          row_mean[r] = mean;
          row_rstd[r] = rstd;
        }
      });
    }
  }

  /// LayerNorm's backward pass (core/primitives.hpp). The gain's and bias's sums over rows go
  /// through partial sums of fixed blocks of rows, added in block order: the same numbers for
  /// any thread count.
  template <class T>
  static void layer_norm_rows_backward(T* dx, bool add, T* gain_grad, T* bias_grad, const T* dy, const T* in,
                                       const accumulate_t<T>* row_mean, const accumulate_t<T>* row_rstd, const T* gain,
                                       index_t rows, index_t width) {
    if constexpr (is_float16_storage<T>) {
      const index_t n = rows * width;
      auto wide_dx = dx && add ? widen(dx, n) : std::vector<float>(dx ? std::size_t(n) : 0);
      auto wide_gain_grad = widen(gain_grad, gain_grad ? width : 0);
      auto wide_bias_grad = widen(bias_grad, bias_grad ? width : 0);
      layer_norm_rows_backward(dx ? wide_dx.data() : nullptr, add, gain_grad ? wide_gain_grad.data() : nullptr,
                               bias_grad ? wide_bias_grad.data() : nullptr, widen(dy, n).data(), widen(in, n).data(),
                               row_mean, row_rstd, widen(gain, width).data(), rows, width);
      if (dx) narrow(dx, wide_dx);
      if (gain_grad) narrow(gain_grad, wide_gain_grad);
      if (bias_grad) narrow(bias_grad, wide_bias_grad);
    } else {
      using row_array = Eigen::Array<T, 1, Eigen::Dynamic>;
      const Eigen::Map<const row_array> gain_row(gain, width);
      const index_t blocks = (rows + layer_norm_block_rows - 1) / layer_norm_block_rows;
      const bool sums = gain_grad || bias_grad;
      std::vector<T> partial(sums ? static_cast<std::size_t>(blocks * 2 * width) : 0);
      cpu_backend::parallel_for(blocks, 1, std::max<index_t>(1, 16384 / (layer_norm_block_rows * std::max<index_t>(1, width))),
                                [&](index_t begin, index_t end) {
        row_array x_hat(width), g(width);
        for (index_t block = begin; block < end; ++block) {
          Eigen::Map<row_array> gain_sum(sums ? partial.data() + block * 2 * width : nullptr, sums ? width : 0);
          Eigen::Map<row_array> bias_sum(sums ? partial.data() + (block * 2 + 1) * width : nullptr, sums ? width : 0);
          if (sums) {
            gain_sum.setZero();
            bias_sum.setZero();
          }
          for (index_t r = block * layer_norm_block_rows; r < std::min(rows, (block + 1) * layer_norm_block_rows); ++r) {
            const Eigen::Map<const row_array> x(in + r * width, width), d(dy + r * width, width);
            const T rstd = row_rstd[r];
            x_hat = (x - row_mean[r]) * rstd;
            if (sums) {
              gain_sum += d * x_hat;
              bias_sum += d;
            }
            if (!dx) continue;
            g = d * gain_row;
            const T g_mean = g.sum() / T(width), gx_mean = (g * x_hat).sum() / T(width);
            Eigen::Map<row_array> dx_row(dx + r * width, width);
            if (add) dx_row += (g - g_mean - x_hat * gx_mean) * rstd;
            else dx_row = (g - g_mean - x_hat * gx_mean) * rstd;
          }
        }
      });
      if (!sums) return;
      for (index_t block = 0; block < blocks; ++block) {
        if (gain_grad) Eigen::Map<row_array>(gain_grad, width) += Eigen::Map<const row_array>(partial.data() + block * 2 * width, width);
        if (bias_grad) Eigen::Map<row_array>(bias_grad, width) += Eigen::Map<const row_array>(partial.data() + (block * 2 + 1) * width, width);
      }
    }
  }

  /// Adam's update of every tensor, each split over the threads.
  template <class T>
  static void adam_step(std::span<const adam_tensor<T>> tensors, const adam_coefficients& c) {
    const T b1 = T(c.beta1), b2 = T(c.beta2), rest1 = T(1 - c.beta1), rest2 = T(1 - c.beta2);
    const T step_size = T(c.step_size), root_correction2 = T(c.root_correction2), epsilon = T(c.epsilon);
    for (const adam_tensor<T>& t : tensors) {
      // With Eigen's arrays, a chunk at a time while it is in the cache: a plain loop is not
      // vectorised (std::sqrt may set errno). The same operations in the same order, so the same
      // bits; the square roots exact (Eigen's float sqrt is an approximation under its fast math).
      using array = Eigen::Array<T, Eigen::Dynamic, 1>;
      cpu_backend::parallel_for(t.size, 16, 1 << 14, [&](index_t begin, index_t end) {
        constexpr index_t chunk = 2048;
        T root[chunk];
        for (index_t at = begin; at < end; at += chunk) {
          const index_t n = std::min(chunk, end - at);
          const Eigen::Map<const array> g(t.grad + at, n);
          Eigen::Map<array> m(t.first_moment + at, n), v(t.second_moment + at, n), value(t.value + at, n);
          m = b1 * m + rest1 * g;
          v = b2 * v + rest2 * g * g;
          cpu_backend::vector_math::exact_sqrt(root, v.data(), n);
          value -= step_size * m / (Eigen::Map<const array>(root, n) * root_correction2 + epsilon);
        }
      });
    }
  }

  template <class T>
  static void fill(T* data, index_t count, T value) {
    std::fill(data, data + count, value);
  }

  /// In array order, one element after another: the same sum for any thread count.
  template <class T>
  static double sum_of_squares(std::span<const flat_array<const T>> arrays) {
    double squares = 0;
    for (const auto& a : arrays)
      for (index_t i = 0; i < a.size; ++i) squares += double(a.data[i]) * double(a.data[i]);
    return squares;
  }

  template <class T>
  static void scale(std::span<const flat_array<T>> arrays, double factor) {
    for (const auto& a : arrays)
      for (index_t i = 0; i < a.size; ++i) a.data[i] = T(double(a.data[i]) * factor);
  }

  template <class T>
  static void fill(std::span<const flat_array<T>> arrays, T value) {
    for (const auto& a : arrays) fill(a.data, a.size, value);
  }

 private:
  /// y[i] = exp(y[i]), and their sum.
  template <class T>
  static T exp_and_sum(T* y, index_t n) {
    if constexpr (std::is_same_v<T, float>) {
      return cpu_backend::vector_math::exp_and_sum(y, n);
    } else {
      Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> row(y, n);
      row = row.exp();
      return row.sum();
    }
  }

  /// A 16-bit array's values in float (none for a null pointer).
  template <class T>
  static std::vector<float> widen(const T* data, index_t count) {
    return cpu_backend::conversions::widened(data, count);
  }
  /// Float results stored in a 16-bit array, each rounded once.
  template <class T>
  static void narrow(T* out, const std::vector<float>& wide) {
    cpu_backend::conversions::narrow(out, wide.data(), index_t(wide.size()));
  }
  /// How many rows of its data a repeated_rows operand of `rows` rows reads.
  template <class T>
  static index_t bias_rows(const repeated_rows<T>& bias, index_t rows) {
    index_t most = 0;
    for (index_t r = 0; r < rows; ++r) most = std::max(most, bias.row(r) + 1);
    return most;
  }

  /// Rows whose gain and bias gradients one partial sum holds (LayerNorm's backward pass).
  static constexpr index_t layer_norm_block_rows = 32;

  static index_t rows_per_piece(index_t width) { return std::max<index_t>(1, 4096 / std::max<index_t>(1, width)); }

  static void check_rows(const index_t* keep, index_t count, index_t rows) {
    for (index_t i = 0; i < count; ++i) {
      if (keep[i] < 0 || keep[i] >= rows)
        throw extent_error("attn::select_rows", "rows",
                           "has extent " + std::to_string(rows) + ", but row " + std::to_string(keep[i]) + " was kept");
    }
  }
};

}  // namespace attn
