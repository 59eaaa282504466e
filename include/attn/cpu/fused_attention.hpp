// Fused attention on the CPU (core/fused_attention.hpp): the tiled algorithm of FlashAttention-2
// (Dao, 2023) written plainly, as the reference of the GPU kernel and so that long sequences fit:
// a worker holds one [query_tile, key_tile] block of scores, never [queries, keys].
//   forward    one (sentence, head, query tile) a task; key tiles stream through an online
//              softmax: running maximum m, running sum l, output rescaled by exp(m_old − m_new).
//   backward   one pass that recomputes P = exp(S − log_sum_exp) a tile at a time: a task a
//              (sentence, key/value head, chunk of key tiles) gathers dK and dV of its keys and
//              adds dQ into its chunk's own dQ; the chunks' dQ are summed in order, so that no
//              two tasks add into one number and the result is the same bits on any threads.
// Key tiles past a sentence's length, past the causal diagonal, or where the rule or the bias
// hides every pair are skipped, so a rule such as restricted attention's costs O(r·n·d) products;
// a rule that gives its spans (key_band) is not even asked outside them.
// A score modification (a variant's: ALiBi, a soft cap) is applied a score at a time inside the
// tile; the gradients of its learned inputs are summed over fixed runs of tasks, the runs' sums
// added in order, so that they too are the same bits whatever the threads. Dropout on
// the weights draws the unfused path's mask from the counter-based stream, a weight at a time,
// after the softmax's sums.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "../core/float16.hpp"
#include "../core/fused_attention.hpp"
#include "conversions.hpp"
#include "dnnl_gemm.hpp"
#include "gemm.hpp"
#include "threads.hpp"
#include "vector_math.hpp"

namespace attn {

template <>
struct fused_attention<cpu> {
  static constexpr bool available = true;
  // bench_fused_attention, 2-vCPU EPYC (Zen 5), docs/fused-attention.md: from 256 keys the fused
  // forward + backward is level with the unfused one or faster (training's batches: 1.18× full,
  // 1.32× causal at 256; one sentence: 0.98× and 1.00× at 256, 0.91× full at 512, then 1.35× and
  // more), and its memory is O(n). With few queries (a decoding step: 4 against 64 … 4096 keys)
  // it is slower at every length (0.69–0.89×): the unfused path keeps them.
  static constexpr index_t widest_head = std::numeric_limits<index_t>::max();  // any: Eigen's tiles
  static constexpr index_t automatic_from_keys = 256;
  static constexpr index_t automatic_from_queries = 64;
  // One road for every type and width (16-bit inputs widened to float).
  template <class T>
  static bool fast_for(index_t /*head_width*/) {
    return true;
  }
  // A modified variant's unfused path evaluates its expression through Eigen's broadcast index
  // leaves (~20 ns a score): ALiBi fused is 1.5× faster forward + backward at 16 keys, 2.5× at 64.
  static constexpr index_t automatic_modified_from_keys = 1;
  static constexpr bool modifies_scores = true;
  static constexpr index_t query_tile = 128;
  static constexpr index_t key_tile = 128;

  template <class T, class Rule = every_pair, class Modification = unmodified>
  static void forward(const fused_attention_problem& given, const T* q, const T* k, const T* v, const T* bias, T* out,
                      accumulate_t<T>* log_sum_exp, Rule rule = {}, const Modification& modification = {}) {
    check_problem(given, "attn::fused_attention<cpu>::forward");
    const fused_attention_problem p = given.laid_out();
    if (p.heads_in_rows) {
      // The tiles' products read whole rows of one head: the heads are gathered apart first.
      const fused_attention_problem split = heads_split(p);
      std::vector<T> split_out(std::size_t(sizes(p).out));
      forward(split, apart(q, p.q_layout, p.batch, p.heads, p.queries, p.d_k).data(),
              apart(k, p.k_layout, p.batch, p.kv_heads, p.keys, p.d_k).data(),
              apart(v, p.v_layout, p.batch, p.kv_heads, p.keys, p.d_v).data(), bias, split_out.data(), log_sum_exp,
              rule, modification);
      together(split_out, out, p.out_layout, p.batch, p.heads, p.queries, p.d_v);
      return;
    }
    if constexpr (is_float16_storage<T>) {
      // 16-bit storage: the float kernel on the inputs widened once (O(n) copies), its outputs
      // rounded, which is what tensor cores do with bf16/fp16 operands and fp32 accumulation.
      const sizes n(p);
      std::vector<float> wide_out(std::size_t(n.out));
      tiled_forward(p, widen(q, n.q).data(), widen(k, n.k).data(), widen(v, n.v).data(),
                    bias ? widen(bias, n.bias).data() : nullptr, wide_out.data(), log_sum_exp, rule, modification);
      narrow(wide_out, out);
    } else {
      tiled_forward(p, q, k, v, bias, out, log_sum_exp, rule, modification);
    }
  }

  template <class T, class Rule = every_pair, class Modification = unmodified>
  static void backward(const fused_attention_problem& given, const T* q, const T* k, const T* v, const T* bias,
                       const T* out, const T* d_out, const accumulate_t<T>* log_sum_exp, T* d_q, T* d_k, T* d_v,
                       Rule rule = {}, const Modification& modification = {},
                       accumulate_t<T>* d_modification = nullptr) {
    check_problem(given, "attn::fused_attention<cpu>::backward");
    const fused_attention_problem p = given.laid_out();
    if (p.heads_in_rows) {  // as the forward
      const fused_attention_problem split = heads_split(p);
      const sizes n(p);
      std::vector<T> split_d_q(std::size_t(n.q)), split_d_k(std::size_t(n.k)), split_d_v(std::size_t(n.v));
      backward(split, apart(q, p.q_layout, p.batch, p.heads, p.queries, p.d_k).data(),
               apart(k, p.k_layout, p.batch, p.kv_heads, p.keys, p.d_k).data(),
               apart(v, p.v_layout, p.batch, p.kv_heads, p.keys, p.d_v).data(), bias,
               apart(out, p.out_layout, p.batch, p.heads, p.queries, p.d_v).data(),
               apart(d_out, p.out_layout, p.batch, p.heads, p.queries, p.d_v).data(), log_sum_exp, split_d_q.data(),
               split_d_k.data(), split_d_v.data(), rule, modification, d_modification);
      together(split_d_q, d_q, p.q_layout, p.batch, p.heads, p.queries, p.d_k);
      together(split_d_k, d_k, p.k_layout, p.batch, p.kv_heads, p.keys, p.d_k);
      together(split_d_v, d_v, p.v_layout, p.batch, p.kv_heads, p.keys, p.d_v);
      return;
    }
    if constexpr (is_float16_storage<T>) {  // as the forward: in float, the gradients rounded
      const sizes n(p);
      std::vector<float> wide_d_q(std::size_t(n.q)), wide_d_k(std::size_t(n.k)), wide_d_v(std::size_t(n.v));
      tiled_backward(p, widen(q, n.q).data(), widen(k, n.k).data(), widen(v, n.v).data(),
                     bias ? widen(bias, n.bias).data() : nullptr, widen(out, n.out).data(),
                     widen(d_out, n.out).data(), log_sum_exp, wide_d_q.data(), wide_d_k.data(), wide_d_v.data(), rule,
                     modification, d_modification);
      narrow(wide_d_q, d_q);
      narrow(wide_d_k, d_k);
      narrow(wide_d_v, d_v);
    } else {
      tiled_backward(p, q, k, v, bias, out, d_out, log_sum_exp, d_q, d_k, d_v, rule, modification, d_modification);
    }
  }

 private:
  template <class T, class Rule, class Modification>
  static void tiled_forward(const fused_attention_problem& p, const T* q, const T* k, const T* v, const T* bias, T* out,
                            T* log_sum_exp, Rule rule, const Modification& modification) {
    const index_t query_tiles = tiles(p.queries, query_tile);
    for_tasks(p.batch * p.heads * query_tiles, [&](index_t begin, index_t end) {
      scratch<T> s;
      for (index_t task = begin; task < end; ++task) {
        const query_block at(p, task, query_tiles);
        const matrix_map<const T> q_tile(q + at.row * p.d_k, at.rows, p.d_k);
        matrix_map<T> out_tile(out + at.row * p.d_v, at.rows, p.d_v);
        column<T> running_max = column<T>::Constant(at.rows, -infinity<T>);
        column<T> running_sum = column<T>::Zero(at.rows);
        out_tile.setZero();
        // The keys the rule lets the tile's queries see (a band's neighbourhood), within key_end.
        const index_span seen = rule_keys_seen(rule, p.first_query + at.first, p.first_query + at.first + at.rows - 1);
        const index_t key_end = std::min(at.key_end, seen.end);
        for (index_t key = std::max<index_t>(0, seen.begin); key < key_end; key += key_tile) {
          const index_t cols = std::min(key_tile, key_end - key);
          if (!scores(p, at, key, cols, q_tile, k, bias, rule, modification, s)) continue;
          for (index_t i = 0; i < at.rows; ++i) {
            const T row_max = std::max(running_max(i), s.scores.row(i).maxCoeff());
            if (row_max == -infinity<T>) {  // nothing visible yet in this row
              s.scores.row(i).setZero();
              continue;
            }
            const T rescale = std::exp(running_max(i) - row_max);  // 0 for the first visible tile
            running_sum(i) = running_sum(i) * rescale + exp_of_row(s.scores, i, row_max);
            out_tile.row(i) *= rescale;
            running_max(i) = row_max;
          }
          if (p.dropout > 0) s.scores.array() *= kept(p, at, key, cols, s).array();  // after the sums
          tile_product(out_tile, s.scores, value_map(p, at, key, cols, v), T(1), T(1));
        }
        for (index_t i = 0; i < at.rows; ++i) {
          if (running_sum(i) > T(0)) out_tile.row(i) /= running_sum(i);
          log_sum_exp[at.row + i] = running_sum(i) > T(0) ? running_max(i) + std::log(running_sum(i)) : -infinity<T>;
        }
      }
    });
  }

  template <class T, class Rule, class Modification>
  static void tiled_backward(const fused_attention_problem& p, const T* q, const T* k, const T* v, const T* bias,
                             const T* out, const T* d_out, const T* log_sum_exp, T* d_q, T* d_k, T* d_v, Rule rule,
                             const Modification& modification, T* d_modification) {
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

    // One pass: a task takes a chunk of a key/value head's key tiles and, for each, every query
    // tile of the heads that read it, computing P and dS once for dV, dK and dQ. dK and dV of a
    // key tile are the task's alone; dQ gathers over every key tile, so each chunk adds into a
    // dQ of its own (the first into d_q), summed in chunk order at the end. The chunks are fixed
    // by the problem's sizes, not the threads: the same bits on any number of threads.
    const index_t chunks = key_chunks<T>(p, key_tiles);
    const index_t tasks = p.batch * p.kv_heads * chunks;
    const index_t q_size = p.batch * p.heads * p.queries * p.d_k;
    std::vector<T> more_d_q(static_cast<std::size_t>((chunks - 1) * q_size));
    const auto d_q_of = [&](index_t chunk) { return chunk == 0 ? d_q : more_d_q.data() + (chunk - 1) * q_size; };
    // A modification's learned inputs gather their gradients in at most 64 sums, each over a
    // fixed run of tasks that one thread takes in order, added in order at the end.
    index_t inputs = 0;
    if constexpr (!std::is_same_v<Modification, unmodified>) inputs = d_modification ? modification.gradient_size() : 0;
    const index_t runs = inputs > 0 ? std::min<index_t>(tasks, 64) : tasks;
    std::vector<T> run_sums(static_cast<std::size_t>(runs * inputs), T(0));
    for_tasks(runs, [&](index_t run_begin, index_t run_end) {
      scratch<T> s;
      for (index_t run = run_begin; run < run_end; ++run) {
        T* const sums = inputs > 0 ? run_sums.data() + run * inputs : nullptr;
        for (index_t task = run * tasks / runs; task < (run + 1) * tasks / runs; ++task) {
          const index_t chunk = task % chunks;
          const index_t kv_head = task / chunks % p.kv_heads, b = task / chunks / p.kv_heads;
          T* const chunk_d_q = d_q_of(chunk);
          for (index_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {  // this chunk's dQ rows, zeroed
            const index_t row = (b * p.heads + h) * p.queries;
            std::fill(chunk_d_q + row * p.d_k, chunk_d_q + (row + p.queries) * p.d_k, T(0));
          }
          for (index_t tile = chunk * key_tiles / chunks; tile < (chunk + 1) * key_tiles / chunks; ++tile) {
            const index_t key = tile * key_tile;
            const index_t cols = std::min(key_tile, p.keys - key);
            const index_t kv_row = (b * p.kv_heads + kv_head) * p.keys + key;
            matrix_map<T> d_k_tile(d_k + kv_row * p.d_k, cols, p.d_k);
            matrix_map<T> d_v_tile(d_v + kv_row * p.d_v, cols, p.d_v);
            const matrix_map<const T> k_tile(k + kv_row * p.d_k, cols, p.d_k);
            d_k_tile.setZero();
            d_v_tile.setZero();
            // The query tiles that hold a position the rule lets see a key of this tile.
            const index_span seeing = rule_positions_seeing(rule, key, key + cols - 1);
            const index_t first_q_tile = std::clamp<index_t>(seeing.begin - p.first_query, 0, p.queries) / query_tile;
            const index_t q_tile_end = tiles(std::clamp<index_t>(seeing.end - p.first_query, 0, p.queries), query_tile);
            for (index_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
              for (index_t q_tile_index = first_q_tile; q_tile_index < q_tile_end; ++q_tile_index) {
                const query_block at(p, (b * p.heads + h) * query_tiles + q_tile_index, query_tiles);
                if (key >= at.key_end) continue;
                const matrix_map<const T> q_tile(q + at.row * p.d_k, at.rows, p.d_k);
                if (!probabilities(p, at, key, cols, q_tile, k, bias, log_sum_exp, rule, modification, s)) continue;
                const matrix_map<const T> d_out_tile(d_out + at.row * p.d_v, at.rows, p.d_v);
                if (p.dropout > 0) {  // Z once a tile, in s.kept, for dV here and dP in score_gradient
                  s.d_probabilities = (s.scores.array() * kept(p, at, key, cols, s).array()).matrix();  // P ⊙ Z
                  tile_product(d_v_tile, s.d_probabilities.transpose(), d_out_tile, T(1), T(1));
                } else {
                  tile_product(d_v_tile, s.scores.transpose(), d_out_tile, T(1), T(1));
                }
                score_gradient(p, at, key, cols, d_out_tile, v, d_out_dot_out, modification, sums, s);
                tile_product(d_k_tile, s.scores.transpose(), q_tile, scale, T(1));
                matrix_map<T> d_q_tile(chunk_d_q + at.row * p.d_k, at.rows, p.d_k);
                tile_product(d_q_tile, s.scores, k_tile, scale, T(1));
              }
            }
          }
        }
      }
    });
    if (chunks > 1) {  // d_q += the other chunks' dQ, in chunk order
      cpu_backend::parallel_for(q_size, 1, 4096, [&](index_t begin, index_t end) {
        for (index_t chunk = 1; chunk < chunks; ++chunk) {
          const T* const from = d_q_of(chunk);
          for (index_t i = begin; i < end; ++i) d_q[i] += from[i];
        }
      });
    }
    if (inputs > 0) {
      std::fill(d_modification, d_modification + inputs, T(0));
      for (index_t run = 0; run < runs; ++run)
        for (index_t i = 0; i < inputs; ++i) d_modification[i] += run_sums[static_cast<std::size_t>(run * inputs + i)];
    }
  }

  /// body(begin, end) over tasks [0, count) on the threads, as parallel_for runs it, but inside
  /// a parallel region even for a single task: outside one, a tile's product (oneDNN's or
  /// OpenBLAS's) may take threads of its own and split its sums otherwise than on one thread
  /// (OpenBLAS did: not the same bits); inside one, it runs on the task's thread.
  template <class Body>
  static void for_tasks(index_t count, Body&& body) {
#ifdef _OPENMP
    if (count == 1 && cpu_backend::max_threads() > 1) {
#pragma omp parallel num_threads(2)
      if (omp_get_thread_num() == 0) body(index_t{0}, index_t{1});
      return;
    }
#endif
    cpu_backend::parallel_for(count, 1, 1, body);
  }

  /// How many chunks a key/value head's key tiles are cut into in the backward: enough for about
  /// 64 tasks when the batch has fewer sentences × key/value heads, so that the threads have work,
  /// but no more than the key tiles, and their extra dQ no more than 64 MiB. Sizes only: the
  /// sums' order (and so their bits) must not depend on the threads.
  template <class T>
  static index_t key_chunks(const fused_attention_problem& p, index_t key_tiles) {
    const index_t heads = std::max<index_t>(1, p.batch * p.kv_heads);
    const index_t q_bytes = std::max<index_t>(1, p.batch * p.heads * p.queries * p.d_k * index_t(sizeof(T)));
    const index_t by_memory = 1 + (index_t{64} << 20) / q_bytes;
    return std::max<index_t>(1, std::min({(64 + heads - 1) / heads, key_tiles, by_memory}));
  }

  template <class T>
  using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  template <class T>
  using matrix_map = Eigen::Map<std::conditional_t<std::is_const_v<T>, const matrix<std::remove_const_t<T>>, matrix<T>>>;
  template <class T>
  using vector_map = Eigen::Map<std::conditional_t<std::is_const_v<T>, const Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, 1>,
                                                   Eigen::Matrix<T, Eigen::Dynamic, 1>>>;
  template <class T>
  using column = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  /// A matrix or a map over whole rows (tile_product's operands), or the transpose of one.
  template <class X>
  static constexpr bool whole_rows =
      std::is_same_v<X, matrix<typename X::Scalar>> || std::is_same_v<X, matrix_map<typename X::Scalar>> ||
      std::is_same_v<X, matrix_map<const typename X::Scalar>>;
  template <class X>
  static constexpr bool transposed_whole_rows(std::type_identity<X>) {
    return false;
  }
  template <class X>
  static constexpr bool transposed_whole_rows(std::type_identity<Eigen::Transpose<X>>) {
    return whole_rows<std::remove_const_t<X>>;
  }
  template <class T>
  static constexpr T infinity = std::numeric_limits<T>::infinity();

  static index_t tiles(index_t n, index_t tile) { return (n + tile - 1) / tile; }

  /// How many elements each tensor of a problem has (problem's comment in core/fused_attention.hpp).
  struct sizes {
    index_t q, k, v, bias, out;
    explicit sizes(const fused_attention_problem& p)
        : q(p.batch * p.heads * p.queries * p.d_k),
          k(p.batch * p.kv_heads * p.keys * p.d_k),
          v(p.batch * p.kv_heads * p.keys * p.d_v),
          bias(p.batch * p.queries * p.keys),
          out(p.batch * p.heads * p.queries * p.d_v) {}
  };
  static fused_attention_problem heads_split(fused_attention_problem p) {
    p.heads_in_rows = false;
    return p;
  }
  /// x, laid out as `layout` says (heads_in_rows: [batch, length, heads, width]), as [batch,
  /// heads, length, width].
  template <class T>
  static std::vector<T> apart(const T* x, head_layout layout, index_t batch, index_t heads, index_t length,
                              index_t width) {
    std::vector<T> split(std::size_t(batch * heads * length * width));
    each_head_row(layout, batch, heads, length, width, [&](index_t from, index_t to) {
      std::copy_n(x + from, width, split.begin() + std::ptrdiff_t(to));
    });
    return split;
  }
  /// The inverse of apart: [batch, heads, length, width] into x, laid out as `layout` says.
  template <class T>
  static void together(const std::vector<T>& split, T* x, head_layout layout, index_t batch, index_t heads,
                       index_t length, index_t width) {
    each_head_row(layout, batch, heads, length, width, [&](index_t at, index_t from) {
      std::copy_n(split.begin() + std::ptrdiff_t(from), width, x + at);
    });
  }
  /// f(where a row starts as `layout` says, where it starts in [batch, heads, length, width]) for
  /// every row.
  template <class F>
  static void each_head_row(head_layout layout, index_t batch, index_t heads, index_t length, index_t width, F&& f) {
    cpu_backend::parallel_for(batch * heads, 1, 16, [&](index_t begin, index_t end) {
      for (index_t bh = begin; bh < end; ++bh) {
        const head_rows rows = layout.of(bh / heads, bh % heads);
        for (index_t i = 0; i < length; ++i) f(rows.start + i * rows.stride, (bh * length + i) * width);
      }
    });
  }

  template <class T>
  static std::vector<float> widen(const T* x, index_t n) {
    return cpu_backend::conversions::widened(x, n);
  }
  template <class T>
  static void narrow(const std::vector<float>& wide, T* x) {
    cpu_backend::conversions::narrow(x, wide.data(), index_t(wide.size()));
  }

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

  /// A worker's block of scores (and then of probabilities, then of their gradients), and of
  /// the scaled scores before a modification.
  template <class T>
  struct scratch {
    matrix<T> scores, d_probabilities, scaled, kept;
  };

  /// s.kept = the dropout factors of the tile's weights (problem::kept).
  template <class T>
  static const matrix<T>& kept(const fused_attention_problem& p, const query_block& at, index_t key, index_t cols,
                               scratch<T>& s) {
    s.kept.resize(at.rows, cols);
    for (index_t i = 0; i < at.rows; ++i)
      for (index_t j = 0; j < cols; ++j) s.kept(i, j) = T(p.kept(at.b, at.h, at.first + i, key + j));
    return s.kept;
  }

  using score_coordinates = std::array<index_t, 4>;  // sentence, head, query index, key

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

  /// s.scores = modification(scale · Q·Kᵀ) + bias over the tile, −∞ where a key is hidden
  /// (s.scaled keeps scale · Q·Kᵀ when there is a modification); false (and nothing computed)
  /// when every pair of the tile is hidden.
  template <class T, class Rule, class Modification>
  static bool scores(const fused_attention_problem& p, const query_block& at, index_t key, index_t cols,
                     const matrix_map<const T>& q_tile, const T* k, const T* bias, const Rule& rule,
                     const Modification& modification, scratch<T>& s) {
    const index_t first_position = p.first_query + at.first;
    const T* bias_tile = bias ? bias + (at.b * p.queries + at.first) * p.keys + key : nullptr;
    const auto seen = [&](index_t i, index_t j) {
      return visible(p, at, first_position + i, key + j, rule) &&
             (!bias_tile || bias_tile[i * p.keys + j] > T(hidden_bias));
    };
    // Every pair visible, without asking each: no bias, a rule that allows the whole tile, the
    // tile before the sentence's end and, when causal, its last key at or before its first
    // query's position.
    const bool whole = !bias_tile &&
                       rule_allows_every(rule, first_position, first_position + at.rows - 1, key, key + cols - 1) &&
                       key + cols <= at.key_end && (!p.causal || key + cols - 1 <= first_position);
    bool any = whole;
    for (index_t i = 0; i < at.rows && !any; ++i)
      for (index_t j = 0; j < cols && !any; ++j) any = seen(i, j);
    if (!any) return false;
    s.scores.resize(at.rows, cols);
    tile_product(s.scores, q_tile, key_map(p, at, key, cols, k).transpose(), T(p.scale), T(0));
    if constexpr (!std::is_same_v<Modification, unmodified>) {
      s.scaled = s.scores;
      for (index_t i = 0; i < at.rows; ++i)
        for (index_t j = 0; j < cols; ++j)
          if (whole || seen(i, j))
            s.scores(i, j) = modification(score_coordinates{at.b, at.h, at.first + i, key + j}, s.scaled(i, j));
    }
    if (whole) return true;
    if (bias_tile)
      s.scores += Eigen::Map<const matrix<T>, 0, Eigen::OuterStride<>>(bias_tile, at.rows, cols,
                                                                        Eigen::OuterStride<>(p.keys));
    for (index_t i = 0; i < at.rows; ++i)
      for (index_t j = 0; j < cols; ++j)
        if (!seen(i, j)) s.scores(i, j) = -infinity<T>;
    return true;
  }

  /// c = alpha · a · b + beta · c (beta 0 or 1) for a tile: a, b and c matrices or maps over
  /// adjacent rows, a and b possibly transposed. Float products of 32 × 32 × 64 and more through
  /// oneDNN's sgemm when attn has it (on a Zen 5, one thread: 1.4× OpenBLAS's rate at 64 × 64 ×
  /// 64, 1.75× at 128 × 128 × 64, but 0.7× at 16 × 16 × 64, where a call costs more than it
  /// multiplies: docs/benchmarks.md), else cpu_backend::gemm, a function of the element type
  /// alone whatever the operands' Eigen types (BLAS's gemm, or Eigen's product without BLAS).
  template <class T, class C, class A, class B>
  static void tile_product(C&& c, const A& a, const B& b, T alpha, T beta) {
    static_assert(whole_rows<std::remove_cvref_t<C>>,
                  "a tile product's result must be a matrix or a map over whole rows");
    const auto [a_data, a_transposed] = stored<T>(a);
    const auto [b_data, b_transposed] = stored<T>(b);
    const index_t m = c.rows(), n = c.cols(), k = a.cols();
    if constexpr (std::is_same_v<T, float>) {
      if (cpu_backend::dnnl_gemm_enabled() && m * n * k >= 32 * 32 * 64) {
        cpu_backend::dnnl_gemm(c.data(), a_data, a_transposed, b_data, b_transposed, m, n, k, alpha, beta);
        return;
      }
    }
    cpu_backend::gemm(c.data(), a_data, a_transposed, b_data, b_transposed, m, n, k, alpha, beta);
  }
  /// Where a tile operand's numbers are, and whether it is the transpose of what is stored there:
  /// a matrix or a map over whole rows, or the transpose of one. Nothing else (a block of rows,
  /// an expression) may reach gemm, which reads the numbers as [rows, cols] one row after another.
  template <class T, class X>
  static std::pair<const T*, bool> stored(const X& x) {
    if constexpr (transposed_whole_rows(std::type_identity<X>{})) {
      return {x.nestedExpression().data(), true};
    } else {
      static_assert(whole_rows<X>,
                    "a tile product's operand must be a matrix or a map over whole rows, or a transpose of one");
      return {x.data(), false};
    }
  }

  /// x.row(i) = exp(x.row(i) − shift) (0 where it was −∞); returns the row's sum. Float rows
  /// through vector_math (the widest vectors the CPU has, chosen at run time; the build targets
  /// plain x86-64, so Eigen's exp would run in SSE2).
  template <class T>
  static T exp_of_row(matrix<T>& x, index_t i, T shift) {
    auto row = x.row(i);
    row.array() -= shift;
    if constexpr (std::is_same_v<T, float>) {
      return cpu_backend::vector_math::exp_and_sum(row.data(), row.size());
    } else {
      row = row.array().exp().matrix();
      return row.sum();
    }
  }

  template <class Rule>
  static bool visible(const fused_attention_problem& p, const query_block& at, index_t query, index_t key,
                      const Rule& rule) {
    return key < at.key_end && (!p.causal || key <= query) && rule(query, key);
  }

  /// s.scores = P = exp(score − log_sum_exp) over the tile (0 where hidden).
  template <class T, class Rule, class Modification>
  static bool probabilities(const fused_attention_problem& p, const query_block& at, index_t key, index_t cols,
                            const matrix_map<const T>& q_tile, const T* k, const T* bias, const T* log_sum_exp,
                            const Rule& rule, const Modification& modification, scratch<T>& s) {
    if (!scores(p, at, key, cols, q_tile, k, bias, rule, modification, s)) return false;
    for (index_t i = 0; i < at.rows; ++i) {
      const T lse = log_sum_exp[at.row + i];
      if (lse == -infinity<T>) s.scores.row(i).setZero();
      else exp_of_row(s.scores, i, lse);
    }
    return true;
  }

  /// s.scores = dS = P ⊙ (dO·Vᵀ ⊙ Z − D), from P in s.scores and, with dropout, the tile's
  /// dropout factors Z in s.kept (kept()): the gradient of the scaled scores, through the
  /// modification's derivative when there is one; its inputs' gradients added to `sums` when given.
  template <class T, class Modification>
  static void score_gradient(const fused_attention_problem& p, const query_block& at, index_t key, index_t cols,
                             const matrix_map<const T>& d_out_tile, const T* v, const std::vector<T>& d_out_dot_out,
                             const Modification& modification, T* sums, scratch<T>& s) {
    s.d_probabilities.resize(at.rows, cols);
    tile_product(s.d_probabilities, d_out_tile, value_map(p, at, key, cols, v).transpose(), T(1), T(0));
    if (p.dropout > 0) s.d_probabilities.array() *= s.kept.array();  // dP through the mask
    for (index_t i = 0; i < at.rows; ++i)
      s.scores.row(i).array() *=
          s.d_probabilities.row(i).array() - d_out_dot_out[static_cast<std::size_t>(at.row + i)];
    if constexpr (!std::is_same_v<Modification, unmodified>) {
      for (index_t i = 0; i < at.rows; ++i)
        for (index_t j = 0; j < cols; ++j) {
          T& d_score = s.scores(i, j);
          if (d_score == T(0)) continue;  // hidden, or no gradient
          const score_coordinates c{at.b, at.h, at.first + i, key + j};
          if (sums) modification.accumulate(c, s.scaled(i, j), d_score, sums);
          d_score *= modification.derivative(c, s.scaled(i, j));
        }
    }
  }
};

}  // namespace attn
