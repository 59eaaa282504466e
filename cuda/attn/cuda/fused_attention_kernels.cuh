// The CUDA-core kernels of fused attention on the GPU (core/fused_attention.hpp): the CPU
// kernel's algorithm (cpu/fused_attention.hpp, its readable reference) in float or double, and
// bfloat16 and float16 widened to float as they are loaded. fused_attention_launch.cuh launches
// them; fused_attention_tensor_cores.cuh has the 16-bit kernels on tensor cores.
//   forward    a block a (sentence, head, 64 queries), a thread a query row: its query, its
//              running maximum and sum and its output in registers; key and value tiles of 32
//              rows pass through shared memory; the row's log-sum-exp is saved.
//   backward   D = rowsum(dO ⊙ O); then a block a (sentence, key/value head, 64 keys), a thread a
//              key row, gathers dK and dV over every query of the heads that read it, and a block
//              a (sentence, head, 64 queries) gathers dQ: no two threads write one gradient, no
//              atomics, the same bits every run.
// A variant's score modification M (score_modification.cuh's device form, or no_score_modification)
// is evaluated a score at a time as on the CPU; its learned inputs' gradients are summed a query
// row at a time into a row's own slice of a scratch buffer, then the rows in a fixed order
// (sum_rows): no atomics there either. A rule's spans (key_band's) bound the tiles a block walks.
// Device code only: the CPU emulator (emulator.hpp) runs it too.
#pragma once

#include <attn/core.hpp>
#include <attn/core/float16.hpp>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "fused_attention_masks.cuh"

namespace attn::cuda_backend::fused_attention_kernels {

inline constexpr int query_rows = 64;  // threads, and queries, a block of the forward and dQ
inline constexpr int key_rows = 64;    // threads, and keys, a block of dK and dV

/// Rows of the other side staged in shared memory at a time: two [tile, D] arrays in 40 KiB
/// (48 KiB is the static limit), so 16 for double at D = 128, 32 otherwise.
template <class T, int D>
inline constexpr int tile = 2 * 32 * D * int(sizeof(T)) <= 40 * 1024 ? 32 : 16;

template <class T>
__device__ inline T exp_of(T a) {
  if constexpr (std::is_same_v<T, float>) return ::expf(a);
  else return ::exp(a);
}
template <class T>
__device__ inline T log_of(T a) {
  if constexpr (std::is_same_v<T, float>) return ::logf(a);
  else return ::log(a);
}
template <class T>
__device__ inline T infinity() {
  return std::numeric_limits<T>::infinity();
}

/// Loads `count` rows of width d from rows `first` … of a head's rows (x.start, x.stride) of
/// `from` into shared s[tile][D] (zeros past them), widened to the accumulator type A.
template <int D, class A, class T>
__device__ inline void stage(A (*s)[D], const T* from, head_rows x, index_t first, index_t count, index_t d) {
  for (int e = threadIdx.x; e < tile<A, D> * D; e += blockDim.x) {
    const int r = e / D, c = e % D;
    s[r][c] = r < count && c < d ? A(from[x.start + (first + r) * x.stride + c]) : A(0);
  }
}

template <int D, class T, class Rule, class M>
__global__ void forward(fused_attention_problem p, const T* q, const T* k, const T* v, const T* bias, T* out,
                        accumulate_t<T>* log_sum_exp, Rule rule, M modification) {
  using A = accumulate_t<T>;  // 16-bit inputs are read into float
  constexpr int tile = fused_attention_kernels::tile<A, D>;
  __shared__ A keys_tile[tile][D];
  __shared__ A values_tile[tile][D];
  const index_t b = blockIdx.z, h = blockIdx.y;
  const index_t first = index_t(blockIdx.x) * query_rows, i = first + threadIdx.x;
  const bool row = i < p.queries;
  const heads_of at(p, b, h);
  const index_t key_end = key_end_of(p, b);
  const index_span block_keys = keys_seen(p, first, query_rows, key_end, rule, tile);

  A query[D], acc[D];
  for (int c = 0; c < D; ++c) {
    query[c] = row && c < p.d_k ? A(q[at.q.start + i * at.q.stride + c]) : A(0);
    acc[c] = A(0);
  }
  A running_max = -infinity<A>(), running_sum = A(0);
  const A scale = A(p.scale);
  for (index_t key = block_keys.begin; key < block_keys.end; key += tile) {
    const index_t count = block_keys.end - key < tile ? block_keys.end - key : tile;
    __syncthreads();
    stage<D>(keys_tile, k, at.k, key, count, p.d_k);
    stage<D>(values_tile, v, at.v, key, count, p.d_v);
    __syncthreads();
    if (!row) continue;
    for (index_t j = 0; j < count; ++j) {
      if (!visible(p, b, i, key + j, key_end, bias, rule)) continue;
      A s = A(0);
#pragma unroll
      for (int c = 0; c < D; ++c) s += query[c] * keys_tile[j][c];
      s = modified(modification, b, h, i, key + j, s * scale) +
          (bias ? A(bias[(b * p.queries + i) * p.keys + key + j]) : A(0));
      const A new_max = s > running_max ? s : running_max;
      const A rescale = exp_of(running_max - new_max);  // 0 for the first visible key
      const A weight = exp_of(s - new_max);
      running_sum = running_sum * rescale + weight;
      const A kept = p.dropout > 0 ? weight * A(p.kept(b, h, i, key + j)) : weight;  // after the sum
#pragma unroll
      for (int c = 0; c < D; ++c) acc[c] = acc[c] * rescale + kept * values_tile[j][c];
      running_max = new_max;
    }
  }
  if (!row) return;
#pragma unroll
  for (int c = 0; c < D; ++c)  // a compile-time bound keeps acc in registers
    if (c < p.d_v) out[at.out.start + i * at.out.stride + c] = running_sum > A(0) ? acc[c] / running_sum : A(0);
  log_sum_exp[at.query_row + i] = running_sum > A(0) ? running_max + log_of(running_sum) : -infinity<A>();
}

/// D_r = Σ_c dO[r, c] · O[r, c] for row r of [batch · heads · queries].
template <class T>
__device__ inline accumulate_t<T> row_dot(const fused_attention_problem& p, const T* d_out, const T* out, index_t r) {
  using A = accumulate_t<T>;
  const index_t start = p.out_row_start(r);
  A sum = A(0);
  for (index_t c = 0; c < p.d_v; ++c) sum += A(d_out[start + c]) * A(out[start + c]);
  return sum;
}

/// row_dot, a thread a row.
template <class T>
__global__ void row_dots(fused_attention_problem p, const T* d_out, const T* out, accumulate_t<T>* dots,
                         index_t rows) {
  const index_t r = index_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < rows) dots[r] = row_dot(p, d_out, out, r);
}

/// dK and dV of 64 keys of one key/value head: a thread a key, over every query that reads it.
template <int D, class T, class Rule, class M>
__global__ void backward_keys(fused_attention_problem p, const T* q, const T* k, const T* v, const T* bias,
                              const T* d_out, const accumulate_t<T>* log_sum_exp, const accumulate_t<T>* dots, T* d_k,
                              T* d_v, Rule rule, M modification) {
  using A = accumulate_t<T>;
  constexpr int tile = fused_attention_kernels::tile<A, D>;
  __shared__ A queries_tile[tile][D];
  __shared__ A d_out_tile[tile][D];
  __shared__ A lse_tile[tile], dots_tile[tile];
  const index_t b = blockIdx.z, kv_head = blockIdx.y;
  const index_t j = index_t(blockIdx.x) * key_rows + threadIdx.x;
  const index_t key_end = key_end_of(p, b);
  const bool row = j < p.keys;
  const head_rows key_head = p.k_rows(b, kv_head), value_head = p.v_rows(b, kv_head);
  A key[D], value[D], dk[D], dv[D];
  for (int c = 0; c < D; ++c) {
    key[c] = row && c < p.d_k ? A(k[key_head.start + j * key_head.stride + c]) : A(0);
    value[c] = row && c < p.d_v ? A(v[value_head.start + j * value_head.stride + c]) : A(0);
    dk[c] = dv[c] = A(0);
  }
  const A scale = A(p.scale);
  const index_t group = p.heads / p.kv_heads;
  const index_t first_key = index_t(blockIdx.x) * key_rows;
  const index_span block_queries = queries_seeing(p, first_key, key_rows, rule, tile);
  for (index_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    const index_t query_row = (b * p.heads + h) * p.queries;
    for (index_t query = block_queries.begin; query < block_queries.end; query += tile) {
      const index_t count = block_queries.end - query < tile ? block_queries.end - query : tile;
      __syncthreads();
      stage<D>(queries_tile, q, p.q_rows(b, h), query, count, p.d_k);
      stage<D>(d_out_tile, d_out, p.out_rows(b, h), query, count, p.d_v);
      for (int r = threadIdx.x; r < tile; r += blockDim.x) {
        lse_tile[r] = r < count ? log_sum_exp[query_row + query + r] : A(0);
        dots_tile[r] = r < count ? dots[query_row + query + r] : A(0);
      }
      __syncthreads();
      if (!row) continue;
      for (index_t r = 0; r < count; ++r) {
        const index_t i = query + r;
        if (!visible(p, b, i, j, key_end, bias, rule) || lse_tile[r] == -infinity<A>()) continue;
        A s = A(0), dp = A(0);
#pragma unroll
        for (int c = 0; c < D; ++c) {
          s += queries_tile[r][c] * key[c];
          dp += d_out_tile[r][c] * value[c];
        }
        const A scaled = s * scale;
        s = modified(modification, b, h, i, j, scaled) + (bias ? A(bias[(b * p.queries + i) * p.keys + j]) : A(0));
        const A probability = exp_of(s - lse_tile[r]);
        const A kept = p.dropout > 0 ? A(p.kept(b, h, i, j)) : A(1);
        A d_score = probability * (dp * kept - dots_tile[r]);
        if constexpr (M::modifies)  // as the CPU: no derivative where dS is 0 (it may be ∞ or NaN there)
          if (d_score != A(0)) d_score *= modification.derivative(score_position{{b, h, i, j}}, scaled);
#pragma unroll
        for (int c = 0; c < D; ++c) {
          dv[c] += probability * kept * d_out_tile[r][c];
          dk[c] += scale * d_score * queries_tile[r][c];
        }
      }
    }
  }
  if (!row) return;
  for (int c = 0; c < D; ++c) {
    if (c < p.d_k) d_k[key_head.start + j * key_head.stride + c] = dk[c];
    if (c < p.d_v) d_v[value_head.start + j * value_head.stride + c] = dv[c];
  }
}

/// dQ of 64 queries of one head: a thread a query, over every key it sees; sentences from
/// first_sentence on, one a grid row. With a modification whose inputs learn, the row's share of
/// their gradients into its own slice of `input_gradients`, which holds the launch's rows (zeros
/// at first): at each score, or, where each input's element is the same along the row's keys
/// (device_score_modification::holds_along_keys: ALiBi's slope a head), summed in registers
/// and added once.
template <int D, class T, class Rule, class M>
__global__ void backward_queries(fused_attention_problem p, const T* q, const T* k, const T* v, const T* bias,
                                 const T* d_out, const accumulate_t<T>* log_sum_exp, const accumulate_t<T>* dots,
                                 T* d_q, Rule rule, M modification, accumulate_t<T>* input_gradients,
                                 index_t first_sentence) {
  using A = accumulate_t<T>;
  constexpr int tile = fused_attention_kernels::tile<A, D>;
  __shared__ A keys_tile[tile][D];
  __shared__ A values_tile[tile][D];
  const index_t b = first_sentence + blockIdx.z, h = blockIdx.y;
  [[maybe_unused]] const index_t first_row = first_sentence * p.heads * p.queries;  // the launch's first row
  const index_t first = index_t(blockIdx.x) * query_rows, i = first + threadIdx.x;
  const bool row = i < p.queries;
  const heads_of at(p, b, h);
  const index_t key_end = key_end_of(p, b);
  const index_span block_keys = keys_seen(p, first, query_rows, key_end, rule, tile);
  A query[D], d_o[D], dq[D];
  for (int c = 0; c < D; ++c) {
    query[c] = row && c < p.d_k ? A(q[at.q.start + i * at.q.stride + c]) : A(0);
    d_o[c] = row && c < p.d_v ? A(d_out[at.out.start + i * at.out.stride + c]) : A(0);
    dq[c] = A(0);
  }
  const A lse = row ? log_sum_exp[at.query_row + i] : A(0);
  const A dot = row ? dots[at.query_row + i] : A(0);
  const A scale = A(p.scale);
  constexpr int held = held_inputs<M>();
  A sums[held > 0 ? held : 1] = {};
  for (index_t key = block_keys.begin; key < block_keys.end; key += tile) {
    const index_t count = block_keys.end - key < tile ? block_keys.end - key : tile;
    __syncthreads();
    stage<D>(keys_tile, k, at.k, key, count, p.d_k);
    stage<D>(values_tile, v, at.v, key, count, p.d_v);
    __syncthreads();
    if (!row || lse == -infinity<A>()) continue;
    for (index_t j = 0; j < count; ++j) {
      if (!visible(p, b, i, key + j, key_end, bias, rule)) continue;
      A s = A(0), dp = A(0);
#pragma unroll
      for (int c = 0; c < D; ++c) {
        s += query[c] * keys_tile[j][c];
        dp += d_o[c] * values_tile[j][c];
      }
      const A scaled = s * scale;
      s = modified(modification, b, h, i, key + j, scaled) +
          (bias ? A(bias[(b * p.queries + i) * p.keys + key + j]) : A(0));
      const A probability = exp_of(s - lse);
      const A kept = p.dropout > 0 ? A(p.kept(b, h, i, key + j)) : A(1);
      A d_score = probability * (dp * kept - dot);
      if constexpr (M::modifies) {
        const score_position score{{b, h, i, key + j}};
        if (d_score != A(0)) {  // 0: hidden, or no gradient
          if (input_gradients != nullptr) {
            if constexpr (held > 0)
              modification.hold(score, scaled, d_score, true, sums);
            else
              modification.accumulate(score, scaled, d_score,
                                      input_gradients + (at.query_row + i - first_row) * modification.size);
          }
          d_score *= modification.derivative(score, scaled);
        }
      }
#pragma unroll
      for (int c = 0; c < D; ++c) dq[c] += scale * d_score * keys_tile[j][c];
    }
  }
  if (!row) return;
  if constexpr (held > 0) {
    // Adding each sum to the zeros once gives the bits that adding each share did.
    if (input_gradients != nullptr)
      modification.add_held(score_position{{b, h, i, block_keys.begin}}, sums,
                            input_gradients + (at.query_row + i - first_row) * modification.size);
  }
#pragma unroll
  for (int c = 0; c < D; ++c)
    if (c < p.d_k) d_q[at.q.start + i * at.q.stride + c] = dq[c];
}

/// out[e] = sums[e] rounded to T, a thread an element: dQ from the float sums the tensor-core
/// dK/dV kernel adds it into.
template <class T>
__global__ void rounded(const float* sums, T* out, index_t count) {
  const index_t e = index_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < count) out[e] = T(sums[e]);
}

/// sums[e] = Σ_r rows[r · size + e] over every row in a fixed order (a block an element; its
/// threads' strided sums combined by a fixed tree), added to sums[e] when `add`: the same bits
/// every run.
template <class A>
__global__ void sum_rows(const A* rows, A* sums, index_t count, index_t size, bool add) {
  constexpr int threads = 256;
  __shared__ A partial[threads];
  const index_t e = blockIdx.x;
  A sum = A(0);
  for (index_t r = threadIdx.x; r < count; r += threads) sum += rows[r * size + e];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[e] = add ? sums[e] + partial[0] : partial[0];
}

}  // namespace attn::cuda_backend::fused_attention_kernels
