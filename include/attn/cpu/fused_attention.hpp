// Fused attention on the CPU (core/fused_attention.hpp): the tiled algorithm of FlashAttention-2
// (Dao, 2023) written plainly, as the reference of the GPU kernel and so that long sequences fit:
// a worker holds one [query_tile, key_tile] block of scores, never [queries, keys].
//   forward    one (sentence, head, query tile) a task; key tiles stream through an online
//              softmax: running maximum m, running sum l, output rescaled by exp(m_old − m_new).
//   backward   two passes that recompute P = exp(S − log_sum_exp) tile by tile: dK and dV a
//              (sentence, key/value head, key tile) a task, dQ a (sentence, head, query tile) a
//              task, so that no two tasks add into one gradient and the result is deterministic.
// Key tiles past a sentence's length, past the causal diagonal, or where the rule or the bias
// hides every pair are skipped, so a rule such as restricted attention's costs O(r·n·d) products.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "../core/fused_attention.hpp"
#include "threads.hpp"

namespace attn {

template <>
struct fused_attention<cpu> {
  static constexpr bool available = true;
  // bench_fused_attention, 2-vCPU EPYC: from 1024 keys the fused forward + backward is level
  // with the unfused one or faster (1.08× full, 1.49× causal at 1024; 0.5× at 256 and 512, where
  // recomputing the tiles costs more than the n² tensors save) and its memory is O(n).
  static constexpr index_t automatic_from_keys = 1024;
  static constexpr index_t query_tile = 64;
  static constexpr index_t key_tile = 64;

  template <class T, class Rule = every_pair>
  static void forward(const fused_attention_problem& p, const T* q, const T* k, const T* v, const T* bias, T* out,
                      T* log_sum_exp, Rule rule = {}) {
    const index_t query_tiles = tiles(p.queries, query_tile);
    cpu_backend::parallel_for(p.batch * p.heads * query_tiles, 1, 1, [&](index_t begin, index_t end) {
      scratch<T> s;
      for (index_t task = begin; task < end; ++task) {
        const query_block at(p, task, query_tiles);
        const matrix_map<const T> q_tile(q + at.row * p.d_k, at.rows, p.d_k);
        matrix_map<T> out_tile(out + at.row * p.d_v, at.rows, p.d_v);
        column<T> running_max = column<T>::Constant(at.rows, -infinity<T>);
        column<T> running_sum = column<T>::Zero(at.rows);
        out_tile.setZero();
        for (index_t key = 0; key < at.key_end; key += key_tile) {
          const index_t cols = std::min(key_tile, at.key_end - key);
          if (!scores(p, at, key, cols, q_tile, k, bias, rule, s)) continue;
          for (index_t i = 0; i < at.rows; ++i) {
            const T row_max = std::max(running_max(i), s.scores.row(i).maxCoeff());
            if (row_max == -infinity<T>) {  // nothing visible yet in this row
              s.scores.row(i).setZero();
              continue;
            }
            const T rescale = std::exp(running_max(i) - row_max);  // 0 for the first visible tile
            s.scores.row(i) = (s.scores.row(i).array() - row_max).exp().matrix();
            running_sum(i) = running_sum(i) * rescale + s.scores.row(i).sum();
            out_tile.row(i) *= rescale;
            running_max(i) = row_max;
          }
          out_tile.noalias() += s.scores * value_map(p, at, key, cols, v);
        }
        for (index_t i = 0; i < at.rows; ++i) {
          if (running_sum(i) > T(0)) out_tile.row(i) /= running_sum(i);
          log_sum_exp[at.row + i] = running_sum(i) > T(0) ? running_max(i) + std::log(running_sum(i)) : -infinity<T>;
        }
      }
    });
  }

  template <class T, class Rule = every_pair>
  static void backward(const fused_attention_problem& p, const T* q, const T* k, const T* v, const T* bias,
                       const T* out, const T* d_out, const T* log_sum_exp, T* d_q, T* d_k, T* d_v, Rule rule = {}) {
    // D_i = Σ_c dO[i, c] · O[i, c], the row term of softmax's backward (dS = P ⊙ (dP − D)).
    const index_t rows = p.batch * p.heads * p.queries;
    std::vector<T> d_out_dot_out(static_cast<std::size_t>(rows));
    cpu_backend::parallel_for(rows, 1, 64, [&](index_t begin, index_t end) {
      for (index_t r = begin; r < end; ++r)
        d_out_dot_out[static_cast<std::size_t>(r)] =
            vector_map<const T>(d_out + r * p.d_v, p.d_v).dot(vector_map<const T>(out + r * p.d_v, p.d_v));
    });
    const T scale = T(p.scale);
    const index_t query_tiles = tiles(p.queries, query_tile);
    const index_t key_tiles = tiles(p.keys, key_tile);
    const index_t group = p.heads / p.kv_heads;

    // dK and dV: a key tile of one key/value head gathers every query of the heads that read it.
    cpu_backend::parallel_for(p.batch * p.kv_heads * key_tiles, 1, 1, [&](index_t begin, index_t end) {
      scratch<T> s;
      for (index_t task = begin; task < end; ++task) {
        const index_t key = task % key_tiles * key_tile;
        const index_t kv_head = task / key_tiles % p.kv_heads, b = task / key_tiles / p.kv_heads;
        const index_t cols = std::min(key_tile, p.keys - key);
        const index_t kv_row = (b * p.kv_heads + kv_head) * p.keys + key;
        matrix_map<T> d_k_tile(d_k + kv_row * p.d_k, cols, p.d_k);
        matrix_map<T> d_v_tile(d_v + kv_row * p.d_v, cols, p.d_v);
        d_k_tile.setZero();
        d_v_tile.setZero();
        for (index_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
          for (index_t tile = 0; tile < query_tiles; ++tile) {
            const query_block at(p, (b * p.heads + h) * query_tiles + tile, query_tiles);
            if (key >= at.key_end) continue;
            const matrix_map<const T> q_tile(q + at.row * p.d_k, at.rows, p.d_k);
            if (!probabilities(p, at, key, cols, q_tile, k, bias, log_sum_exp, rule, s)) continue;
            const matrix_map<const T> d_out_tile(d_out + at.row * p.d_v, at.rows, p.d_v);
            d_v_tile.noalias() += s.scores.transpose() * d_out_tile;
            score_gradient(p, at, key, cols, d_out_tile, v, d_out_dot_out, s);
            d_k_tile.noalias() += scale * (s.scores.transpose() * q_tile);
          }
        }
      }
    });

    // dQ: a query tile gathers every key tile it sees.
    cpu_backend::parallel_for(p.batch * p.heads * query_tiles, 1, 1, [&](index_t begin, index_t end) {
      scratch<T> s;
      for (index_t task = begin; task < end; ++task) {
        const query_block at(p, task, query_tiles);
        const matrix_map<const T> q_tile(q + at.row * p.d_k, at.rows, p.d_k);
        const matrix_map<const T> d_out_tile(d_out + at.row * p.d_v, at.rows, p.d_v);
        matrix_map<T> d_q_tile(d_q + at.row * p.d_k, at.rows, p.d_k);
        d_q_tile.setZero();
        for (index_t key = 0; key < at.key_end; key += key_tile) {
          const index_t cols = std::min(key_tile, at.key_end - key);
          if (!probabilities(p, at, key, cols, q_tile, k, bias, log_sum_exp, rule, s)) continue;
          score_gradient(p, at, key, cols, d_out_tile, v, d_out_dot_out, s);
          d_q_tile.noalias() += scale * (s.scores * key_map(p, at, key, cols, k));
        }
      }
    });
  }

 private:
  template <class T>
  using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  template <class T>
  using matrix_map = Eigen::Map<std::conditional_t<std::is_const_v<T>, const matrix<std::remove_const_t<T>>, matrix<T>>>;
  template <class T>
  using vector_map = Eigen::Map<std::conditional_t<std::is_const_v<T>, const Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, 1>,
                                                   Eigen::Matrix<T, Eigen::Dynamic, 1>>>;
  template <class T>
  using column = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  template <class T>
  static constexpr T infinity = std::numeric_limits<T>::infinity();

  static index_t tiles(index_t n, index_t tile) { return (n + tile - 1) / tile; }

  /// A task's tile of query rows: sentence b, head h, rows first … first + rows − 1 (row: the
  /// first one's index in [batch · heads · queries]), and the end of the keys it can see.
  struct query_block {
    index_t b, h, first, rows, row, key_end;
    query_block(const fused_attention_problem& p, index_t task, index_t query_tiles)
        : b(task / query_tiles / p.heads),
          h(task / query_tiles % p.heads),
          first(task % query_tiles * query_tile),
          rows(std::min(query_tile, p.queries - first)),
          row((b * p.heads + h) * p.queries + first),
          key_end(p.key_lengths ? std::min(p.keys, p.key_lengths[b]) : p.keys) {
      if (p.causal) key_end = std::min(key_end, p.first_query + first + rows);
      key_end = std::max<index_t>(key_end, 0);
    }
  };

  /// A worker's block of scores (and then of probabilities, then of their gradients).
  template <class T>
  struct scratch {
    matrix<T> scores, d_probabilities;
  };

  template <class T>
  static auto key_map(const fused_attention_problem& p, const query_block& at, index_t key, index_t cols,
                      const T* k) {
    const index_t kv_head = at.h / (p.heads / p.kv_heads);
    return matrix_map<const T>(k + ((at.b * p.kv_heads + kv_head) * p.keys + key) * p.d_k, cols, p.d_k);
  }
  template <class T>
  static auto value_map(const fused_attention_problem& p, const query_block& at, index_t key, index_t cols,
                        const T* v) {
    const index_t kv_head = at.h / (p.heads / p.kv_heads);
    return matrix_map<const T>(v + ((at.b * p.kv_heads + kv_head) * p.keys + key) * p.d_v, cols, p.d_v);
  }

  /// s.scores = scale · Q·Kᵀ + bias over the tile, −∞ where a key is hidden; false (and nothing
  /// computed) when every pair of the tile is hidden.
  template <class T, class Rule>
  static bool scores(const fused_attention_problem& p, const query_block& at, index_t key, index_t cols,
                     const matrix_map<const T>& q_tile, const T* k, const T* bias, const Rule& rule, scratch<T>& s) {
    const index_t first_position = p.first_query + at.first;
    const T* bias_tile = bias ? bias + (at.b * p.queries + at.first) * p.keys + key : nullptr;
    const auto seen = [&](index_t i, index_t j) {
      return visible(p, at, first_position + i, key + j, rule) &&
             (!bias_tile || bias_tile[i * p.keys + j] > T(hidden_bias));
    };
    bool any = false;
    for (index_t i = 0; i < at.rows && !any; ++i)
      for (index_t j = 0; j < cols && !any; ++j) any = seen(i, j);
    if (!any) return false;
    s.scores.resize(at.rows, cols);
    s.scores.noalias() = q_tile * key_map(p, at, key, cols, k).transpose();
    s.scores *= T(p.scale);
    if (bias_tile)
      s.scores += Eigen::Map<const matrix<T>, 0, Eigen::OuterStride<>>(bias_tile, at.rows, cols,
                                                                        Eigen::OuterStride<>(p.keys));
    for (index_t i = 0; i < at.rows; ++i)
      for (index_t j = 0; j < cols; ++j)
        if (!seen(i, j)) s.scores(i, j) = -infinity<T>;
    return true;
  }

  template <class Rule>
  static bool visible(const fused_attention_problem& p, const query_block& at, index_t query, index_t key,
                      const Rule& rule) {
    return key < at.key_end && (!p.causal || key <= query) && rule(query, key);
  }

  /// s.scores = P = exp(scale · Q·Kᵀ − log_sum_exp) over the tile (0 where hidden).
  template <class T, class Rule>
  static bool probabilities(const fused_attention_problem& p, const query_block& at, index_t key, index_t cols,
                            const matrix_map<const T>& q_tile, const T* k, const T* bias, const T* log_sum_exp,
                            const Rule& rule, scratch<T>& s) {
    if (!scores(p, at, key, cols, q_tile, k, bias, rule, s)) return false;
    for (index_t i = 0; i < at.rows; ++i) {
      const T lse = log_sum_exp[at.row + i];
      if (lse == -infinity<T>) s.scores.row(i).setZero();
      else s.scores.row(i) = (s.scores.row(i).array() - lse).exp().matrix();
    }
    return true;
  }

  /// s.scores = dS = P ⊙ (dO·Vᵀ − D), from P in s.scores.
  template <class T>
  static void score_gradient(const fused_attention_problem& p, const query_block& at, index_t key, index_t cols,
                             const matrix_map<const T>& d_out_tile, const T* v, const std::vector<T>& d_out_dot_out,
                             scratch<T>& s) {
    s.d_probabilities.resize(at.rows, cols);
    s.d_probabilities.noalias() = d_out_tile * value_map(p, at, key, cols, v).transpose();
    for (index_t i = 0; i < at.rows; ++i)
      s.scores.row(i).array() *=
          s.d_probabilities.row(i).array() - d_out_dot_out[static_cast<std::size_t>(at.row + i)];
  }
};

}  // namespace attn
