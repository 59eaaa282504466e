// Fused attention on the GPU (core/fused_attention.hpp): the CPU kernel's algorithm
// (cpu/fused_attention.hpp, its readable reference) in CUDA cores, in float or double, and
// bfloat16 and float16 widened to float as they are loaded; the tensor-core kernels
// (fused_attention_tensor_cores.cuh) take the 16-bit types instead when they are enabled.
//   forward    a block a (sentence, head, 64 queries), a thread a query row: its query, its
//              running maximum and sum and its output in registers; key and value tiles of 32
//              rows pass through shared memory; the row's log-sum-exp is saved.
//   backward   D = rowsum(dO ⊙ O); then a block a (sentence, key/value head, 64 keys), a thread a
//              key row, gathers dK and dV over every query of the heads that read it, and a block
//              a (sentence, head, 64 queries) gathers dQ: no two threads write one gradient, no
//              atomics, the same bits every run.
// The first GPU version, for correctness and the fp32 path the issue asks for. A variant's score
// modification (score_modification.cuh: the expression's plans) is evaluated a score at a time
// as on the CPU; its learned inputs' gradients are summed a query row at a time into a row's own
// slice of a scratch buffer, then the rows in a fixed order: no atomics there either.
// Head dims up to 128, any lengths, padding, causal masks, a bias, grouped-query heads, dropout.
#pragma once

#include <attn/core.hpp>
#include <attn/core/float16.hpp>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "fused_attention_masks.cuh"
#include "fused_attention_tensor_cores.cuh"
#include "memory.cuh"
#include "score_modification.cuh"

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

/// Loads `count` rows of width d from rows `first` … of x into shared s[tile][D] (zeros past them),
/// widened to the accumulator type A.
template <int D, class A, class T>
__device__ inline void stage(A (*s)[D], const T* x, index_t first, index_t count, index_t d) {
  for (int e = threadIdx.x; e < tile<A, D> * D; e += blockDim.x) {
    const int r = e / D, c = e % D;
    s[r][c] = r < count && c < d ? A(x[(first + r) * d + c]) : A(0);
  }
}

/// The row-major index of score (b, h, i, j) in [batch, heads, queries, keys]: where a score
/// modification's plans evaluate it.
__device__ inline std::int64_t score_index(const fused_attention_problem& p, index_t b, index_t h, index_t i,
                                           index_t j) {
  return ((std::int64_t(b) * p.heads + h) * p.queries + i) * p.keys + j;
}

/// scale · q·k modified (no_score_modification: unchanged).
template <class A, class M>
__device__ inline A modified(const M& m, const fused_attention_problem& p, index_t b, index_t h, index_t i, index_t j,
                             A scaled) {
  if constexpr (M::modifies) return m(score_index(p, b, h, i, j), scaled);
  else return scaled;
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
  const index_t block_end = keys_seen(p, first, query_rows, key_end);

  A query[D], acc[D];
  for (int c = 0; c < D; ++c) {
    query[c] = row && c < p.d_k ? A(q[(at.query_row + i) * p.d_k + c]) : A(0);
    acc[c] = A(0);
  }
  A running_max = -infinity<A>(), running_sum = A(0);
  const A scale = A(p.scale);
  for (index_t key = 0; key < block_end; key += tile) {
    const index_t count = block_end - key < tile ? block_end - key : tile;
    __syncthreads();
    stage<D>(keys_tile, k + at.kv_row * p.d_k, key, count, p.d_k);
    stage<D>(values_tile, v + at.kv_row * p.d_v, key, count, p.d_v);
    __syncthreads();
    if (!row) continue;
    for (index_t j = 0; j < count; ++j) {
      if (!visible(p, b, i, key + j, key_end, bias, rule)) continue;
      A s = A(0);
#pragma unroll
      for (int c = 0; c < D; ++c) s += query[c] * keys_tile[j][c];
      s = modified(modification, p, b, h, i, key + j, s * scale) +
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
    if (c < p.d_v) out[(at.query_row + i) * p.d_v + c] = running_sum > A(0) ? acc[c] / running_sum : A(0);
  log_sum_exp[at.query_row + i] = running_sum > A(0) ? running_max + log_of(running_sum) : -infinity<A>();
}

/// D_r = Σ_c dO[r, c] · O[r, c], a thread a row.
template <class T>
__global__ void row_dots(const T* d_out, const T* out, accumulate_t<T>* dots, index_t rows, index_t d_v) {
  using A = accumulate_t<T>;
  const index_t r = index_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  A sum = A(0);
  for (index_t c = 0; c < d_v; ++c) sum += A(d_out[r * d_v + c]) * A(out[r * d_v + c]);
  dots[r] = sum;
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
  const index_t kv_row = (b * p.kv_heads + kv_head) * p.keys;
  A key[D], value[D], dk[D], dv[D];
  for (int c = 0; c < D; ++c) {
    key[c] = row && c < p.d_k ? A(k[(kv_row + j) * p.d_k + c]) : A(0);
    value[c] = row && c < p.d_v ? A(v[(kv_row + j) * p.d_v + c]) : A(0);
    dk[c] = dv[c] = A(0);
  }
  const A scale = A(p.scale);
  const index_t group = p.heads / p.kv_heads;
  const index_t first_key = index_t(blockIdx.x) * key_rows;
  const index_t first_query = first_query_seeing(p, first_key);
  for (index_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    const index_t query_row = (b * p.heads + h) * p.queries;
    for (index_t query = first_query - first_query % tile; query < p.queries; query += tile) {
      const index_t count = p.queries - query < tile ? p.queries - query : tile;
      __syncthreads();
      stage<D>(queries_tile, q + query_row * p.d_k, query, count, p.d_k);
      stage<D>(d_out_tile, d_out + query_row * p.d_v, query, count, p.d_v);
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
        s = modified(modification, p, b, h, i, j, scaled) + (bias ? A(bias[(b * p.queries + i) * p.keys + j]) : A(0));
        const A probability = exp_of(s - lse_tile[r]);
        const A kept = p.dropout > 0 ? A(p.kept(b, h, i, j)) : A(1);
        A d_score = probability * (dp * kept - dots_tile[r]);
        if constexpr (M::modifies)  // as the CPU: no derivative where dS is 0 (it may be ∞ or NaN there)
          if (d_score != A(0)) d_score *= modification.derivative(score_index(p, b, h, i, j), scaled);
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
    if (c < p.d_k) d_k[(kv_row + j) * p.d_k + c] = dk[c];
    if (c < p.d_v) d_v[(kv_row + j) * p.d_v + c] = dv[c];
  }
}

/// dQ of 64 queries of one head: a thread a query, over every key it sees; sentences from
/// first_sentence on, one a grid row. With a modification whose inputs learn, the row's share of
/// their gradients into its own slice of `input_gradients`, which holds the launch's rows.
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
  const index_t block_end = keys_seen(p, first, query_rows, key_end);
  A query[D], d_o[D], dq[D];
  for (int c = 0; c < D; ++c) {
    query[c] = row && c < p.d_k ? A(q[(at.query_row + i) * p.d_k + c]) : A(0);
    d_o[c] = row && c < p.d_v ? A(d_out[(at.query_row + i) * p.d_v + c]) : A(0);
    dq[c] = A(0);
  }
  const A lse = row ? log_sum_exp[at.query_row + i] : A(0);
  const A dot = row ? dots[at.query_row + i] : A(0);
  const A scale = A(p.scale);
  for (index_t key = 0; key < block_end; key += tile) {
    const index_t count = block_end - key < tile ? block_end - key : tile;
    __syncthreads();
    stage<D>(keys_tile, k + at.kv_row * p.d_k, key, count, p.d_k);
    stage<D>(values_tile, v + at.kv_row * p.d_v, key, count, p.d_v);
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
      s = modified(modification, p, b, h, i, key + j, scaled) +
          (bias ? A(bias[(b * p.queries + i) * p.keys + key + j]) : A(0));
      const A probability = exp_of(s - lse);
      const A kept = p.dropout > 0 ? A(p.kept(b, h, i, key + j)) : A(1);
      A d_score = probability * (dp * kept - dot);
      if constexpr (M::modifies) {
        const std::int64_t score = score_index(p, b, h, i, key + j);
        if (d_score != A(0)) {  // 0: hidden, or no gradient
          if (input_gradients != nullptr)
            modification.accumulate(score, scaled, d_score,
                                    input_gradients + (at.query_row + i - first_row) * modification.size);
          d_score *= modification.derivative(score, scaled);
        }
      }
#pragma unroll
      for (int c = 0; c < D; ++c) dq[c] += scale * d_score * keys_tile[j][c];
    }
  }
  if (!row) return;
#pragma unroll
  for (int c = 0; c < D; ++c)
    if (c < p.d_k) d_q[(at.query_row + i) * p.d_k + c] = dq[c];
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

/// Calls f with the smallest compiled head width (32, 64, 128) that holds d_k and d_v.
template <class F>
void with_head_width(const fused_attention_problem& p, F&& f) {
  const index_t d = p.d_k > p.d_v ? p.d_k : p.d_v;
  if (d <= 32) f(std::integral_constant<int, 32>{});
  else if (d <= 64) f(std::integral_constant<int, 64>{});
  else if (d <= 128) f(std::integral_constant<int, 128>{});
  else
    throw std::invalid_argument("attn::fused_attention<cuda>: head widths up to 128, not d_k " + std::to_string(p.d_k) +
                                " / d_v " + std::to_string(p.d_v));
}

inline unsigned blocks(index_t n, int per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

}  // namespace attn::cuda_backend::fused_attention_kernels

namespace attn {

template <>
struct fused_attention<cuda> {
  static constexpr bool available = true;
  // Never chosen automatically until it has been measured on a GPU (docs/fused-attention.md):
  // nn takes it only when asked (context::path).
  static constexpr index_t automatic_from_keys = std::numeric_limits<index_t>::max();
  static constexpr index_t automatic_from_queries = std::numeric_limits<index_t>::max();
  static constexpr index_t automatic_modified_from_keys = std::numeric_limits<index_t>::max();
  static constexpr bool modifies_scores = true;

  template <class T, class Rule = every_pair, class Modification = unmodified>
  static void forward(const fused_attention_problem& p, const T* q, const T* k, const T* v, const T* bias, T* out,
                      accumulate_t<T>* log_sum_exp, Rule rule = {}, const Modification& modification = {}) {
    namespace kernels = cuda_backend::fused_attention_kernels;
    if (p.batch * p.heads * p.queries == 0) return;
    cuda_backend::workspace ws;
    const auto on_device = cuda_backend::device_modification(modification, ws);
    kernels::with_head_width(p, [&](auto width) {
      constexpr int D = decltype(width)::value;
      namespace tensor_cores = cuda_backend::fused_attention_tensor_cores;
      if constexpr (is_float16_storage<T> && std::is_same_v<Modification, unmodified>) {
        if (tensor_cores::enabled()) {  // (which evaluate no modification yet)
          const dim3 grid(kernels::blocks(p.queries, tensor_cores::block_rows), unsigned(p.heads), unsigned(p.batch));
          tensor_cores::forward<D><<<grid, tensor_cores::warps * 32, 0, cuda_backend::stream()>>>(
              p, q, k, v, bias, out, log_sum_exp, rule);
          return;
        }
      }
      const dim3 grid(kernels::blocks(p.queries, kernels::query_rows), unsigned(p.heads), unsigned(p.batch));
      kernels::forward<D, T, Rule, std::remove_cvref_t<decltype(on_device)>>
          <<<grid, kernels::query_rows, 0, cuda_backend::stream()>>>(p, q, k, v, bias, out, log_sum_exp, rule,
                                                                     on_device);
    });
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  /// d_modification (device memory, modification.gradient_size() numbers) receives the learned
  /// inputs' gradients; on the way they take a row of that many floats a query row (scratch).
  template <class T, class Rule = every_pair, class Modification = unmodified>
  static void backward(const fused_attention_problem& p, const T* q, const T* k, const T* v, const T* bias,
                       const T* out, const T* d_out, const accumulate_t<T>* log_sum_exp, T* d_q, T* d_k, T* d_v,
                       Rule rule = {}, const Modification& modification = {},
                       accumulate_t<T>* d_modification = nullptr) {
    namespace kernels = cuda_backend::fused_attention_kernels;
    const index_t rows = p.batch * p.heads * p.queries;
    using A = accumulate_t<T>;
    const auto scratch = cuda_backend::allocate_scratch(static_cast<std::size_t>(rows) * sizeof(A));
    A* const dots = static_cast<A*>(scratch.get());
    if (rows > 0) {
      kernels::row_dots<<<kernels::blocks(rows, 256), 256, 0, cuda_backend::stream()>>>(d_out, out, dots, rows, p.d_v);
      ATTN_CUDA_CHECK(cudaGetLastError());
    }
    cuda_backend::workspace ws;
    const auto on_device = cuda_backend::device_modification(modification, ws);
    using M = std::remove_cvref_t<decltype(on_device)>;
    index_t inputs = 0;
    if constexpr (M::modifies) inputs = d_modification != nullptr ? on_device.size : 0;
    // The learned inputs' gradients take `inputs` floats a query row on the way: a launch of the
    // dQ kernel takes as many sentences as keep that under 256 MiB, and their rows are summed
    // into d_modification after it, launch after launch (a fixed order: the same bits).
    const std::size_t sentence_bytes = static_cast<std::size_t>(p.heads * p.queries * inputs) * sizeof(A);
    constexpr std::size_t row_gradient_limit = std::size_t{256} << 20;
    if (sentence_bytes > row_gradient_limit)
      throw std::invalid_argument(
          "attn::fused_attention<cuda>: the score modification's learned inputs (" + std::to_string(inputs) +
          " numbers) would take " + std::to_string(sentence_bytes >> 20) + " MiB of scratch for one sentence's " +
          std::to_string(p.heads * p.queries) +
          " query rows (at most 256 MiB); use the unfused path (nn::attention_path::unfused)");
    const index_t sentences_a_launch =
        inputs > 0 ? std::max<index_t>(1, std::min<index_t>(p.batch, index_t(row_gradient_limit / sentence_bytes)))
                   : std::max<index_t>(1, p.batch);
    const std::size_t row_gradient_bytes = static_cast<std::size_t>(sentences_a_launch) * sentence_bytes;
    const auto row_gradients = cuda_backend::allocate_scratch(row_gradient_bytes);
    A* const input_gradients = static_cast<A*>(row_gradients.get());
    kernels::with_head_width(p, [&](auto width) {
      constexpr int D = decltype(width)::value;
      if constexpr (is_float16_storage<T> && !M::modifies) {
        if (cuda_backend::fused_attention_tensor_cores::enabled()) {
          backward_on_tensor_cores<D>(p, q, k, v, bias, d_out, log_sum_exp, dots, d_q, d_k, d_v, rule);
          return;
        }
      }
      if (p.batch * p.kv_heads * p.keys > 0) {
        const dim3 key_grid(kernels::blocks(p.keys, kernels::key_rows), unsigned(p.kv_heads), unsigned(p.batch));
        kernels::backward_keys<D, T, Rule, M><<<key_grid, kernels::key_rows, 0, cuda_backend::stream()>>>(
            p, q, k, v, bias, d_out, log_sum_exp, dots, d_k, d_v, rule, on_device);
        ATTN_CUDA_CHECK(cudaGetLastError());
      }
      for (index_t first = 0; first < p.batch && p.heads * p.queries > 0; first += sentences_a_launch) {
        const index_t sentences = std::min(sentences_a_launch, p.batch - first);
        if (inputs > 0)
          ATTN_CUDA_CHECK(cudaMemsetAsync(input_gradients, 0, static_cast<std::size_t>(sentences) * sentence_bytes,
                                          cuda_backend::stream()));
        const dim3 query_grid(kernels::blocks(p.queries, kernels::query_rows), unsigned(p.heads), unsigned(sentences));
        kernels::backward_queries<D, T, Rule, M><<<query_grid, kernels::query_rows, 0, cuda_backend::stream()>>>(
            p, q, k, v, bias, d_out, log_sum_exp, dots, d_q, rule, on_device, input_gradients, first);
        ATTN_CUDA_CHECK(cudaGetLastError());
        if (inputs > 0) {
          kernels::sum_rows<<<unsigned(inputs), 256, 0, cuda_backend::stream()>>>(
              input_gradients, d_modification, sentences * p.heads * p.queries, inputs, first > 0);
          ATTN_CUDA_CHECK(cudaGetLastError());
        }
      }
      if (inputs > 0 && p.batch * p.heads * p.queries == 0)  // no rows: no gradient
        ATTN_CUDA_CHECK(cudaMemsetAsync(d_modification, 0, static_cast<std::size_t>(inputs) * sizeof(A),
                                        cuda_backend::stream()));
    });
  }

 private:
  template <int D, class T, class Rule>
  static void backward_on_tensor_cores(const fused_attention_problem& p, const T* q, const T* k, const T* v,
                                       const T* bias, const T* d_out, const float* log_sum_exp, const float* dots,
                                       T* d_q, T* d_k, T* d_v, Rule rule) {
    namespace kernels = cuda_backend::fused_attention_kernels;
    namespace tensor_cores = cuda_backend::fused_attention_tensor_cores;
    constexpr int threads = tensor_cores::warps * 32, bytes = tensor_cores::backward_keys_bytes<D>;
    if (p.batch * p.kv_heads * p.keys > 0) {
      const auto keys_kernel = tensor_cores::backward_keys<D, T, Rule>;
      // Above 48 KiB a kernel must ask for its shared memory, on each device.
      ATTN_CUDA_CHECK(cudaFuncSetAttribute(keys_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
      const dim3 grid(kernels::blocks(p.keys, tensor_cores::block_rows), unsigned(p.kv_heads), unsigned(p.batch));
      keys_kernel<<<grid, threads, bytes, cuda_backend::stream()>>>(p, q, k, v, bias, d_out, log_sum_exp, dots, d_k,
                                                                    d_v, rule);
      ATTN_CUDA_CHECK(cudaGetLastError());
    }
    if (p.batch * p.heads * p.queries > 0) {
      const dim3 grid(kernels::blocks(p.queries, tensor_cores::block_rows), unsigned(p.heads), unsigned(p.batch));
      tensor_cores::backward_queries<D><<<grid, threads, 0, cuda_backend::stream()>>>(
          p, q, k, v, bias, d_out, log_sum_exp, dots, d_q, rule);
      ATTN_CUDA_CHECK(cudaGetLastError());
    }
  }
};

}  // namespace attn
