// Fused attention on tensor cores, bfloat16 and float16 (FlashAttention-2's schedule, our
// masks): the same algorithm as fused_attention.cuh's CUDA-core kernels, which keep float and
// double, with the products on mma.sync (mma.cuh) and float accumulation.
//   forward    a block a (sentence, head, 64 queries), a warp 16 of them: their queries as A
//              fragments, S = Q·Kᵀ and O += P·V a 64-key tile at a time, the online softmax on
//              S's accumulators, P (the weights, rounded to T) fed to the second product from
//              registers. Saves the rows' log-sum-exp.
//   backward   a block a (sentence, key/value head, 64 keys), a warp 16 keys: Sᵀ = K·Qᵀ and
//              dPᵀ = V·dOᵀ a 64-query tile at a time, dV += Pᵀ·dO and dK += dSᵀ·Q, and dQ += dS·K
//              added into float sums with atomics (FlashAttention-2's). Deterministic on request
//              (the same bits every run): dQ then by a block a (sentence, head, 64 queries).
// With the heads in rows, sentences of up to 32 tokens go several to a block, a tile of each side
// holding them all (block_sentences): a sentence of ten tokens alone had left 54 of a block's 64
// rows idle.
// Each kernel double-buffers the tiles it walks through in dynamic shared memory: the next one
// is copied asynchronously (async_copy.cuh) while the tensor cores work on the current one.
// Scores are float; the masks (padding, causal, a rule, a bias), a variant's score modification
// M (its learned inputs' gradients gathered by the dQ kernel, a slot a lane of a query row, then
// summed in a fixed order), dropout and rows with nothing to see behave as in the CUDA-core
// kernels, element by element; the masks' checks are skipped on tiles that no mask can touch, and
// tiles outside a rule's spans (key_band's) are not walked.
// P and dS are rounded to T before their products, as FlashAttention does: the outputs then
// differ from the float kernels' by about T's rounding (docs/fused-attention.md).
// Tiles that no mask (or dropout) touches take branch-free loops, other tiles compare a column
// with a row's span for padding and the causal rule (and a packed sentence's bounds), and whole
// tiles are staged without per-chunk checks: from a half to a third of the instructions a tile
// (docs/benchmarks.md).
// Written without a GPU, checked on the CPU emulator, then on an H200 (the pipelined kernels on
// 2026-11-26, in a second run): on by default (`enabled`). The unmasked loops, the rows' counts,
// whole-tile staging and fast_exp2 (2026-11-26, a seventh session) passed on an H100 on
// 2026-11-28. dQ summed by the dK/dV kernel (2026-11-28, a fourth session) has run on the
// emulator alone: fused_attention_problem::deterministic takes the dQ kernel, which has passed.
#pragma once

#include <attn/core.hpp>
#include <attn/core/float16.hpp>
#include <cstdint>
#include <type_traits>

#include "async_copy.cuh"
#include "fast_divider.cuh"
#include "fast_exp2.cuh"
#include "fused_attention_masks.cuh"
#include "mma.cuh"
#include "plan_cost.cuh"
#include "shared_memory.cuh"
#include "switches.cuh"

// A device function kept out of line (nvcc's __noinline__; libstdc++ spells its own attribute
// with that name, so the emulator does not define it).
#if defined(ATTN_CUDA_EMULATOR)
#define ATTN_CUDA_NOINLINE [[gnu::noinline]]
#else
#define ATTN_CUDA_NOINLINE __noinline__
#endif

namespace attn::cuda_backend::fused_attention_tensor_cores {

namespace kernels = fused_attention_kernels;

/// Whether fused_attention<cuda> runs bfloat16 and float16 on these kernels rather than on the
/// CUDA-core ones: yes (they passed the gpu suite on an H200 on 2026-11-26, at 7–28 times the
/// CUDA-core kernels' speed); ATTN_FUSED_TENSOR_CORES=0 in the environment turns them off. Tests
/// and benchmarks set it both ways. Read by the host at each call.
inline bool& enabled() {
  static bool on = on_unless_zero("ATTN_FUSED_TENSOR_CORES");
  return on;
}

inline constexpr int warps = 4;
inline constexpr int block_rows = 16 * warps;  // queries (dQ) or keys (dK, dV) a block; the forward's below
inline constexpr int tile_rows = 64;           // rows of the other side staged at a time
inline constexpr float log2_e = 1.4426950408889634f;
inline constexpr float ln_2 = 0.6931471805599453f;

/// Numbers a staged row takes: D and 8 more, so that the 8 rows a fragment load touches fall in
/// different banks (and rows stay 16-byte aligned for ldmatrix and vector stores).
template <int D>
inline constexpr int stride = D + 8;

template <class T>
__device__ inline bool aligned16(const T* x) {
  return reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
}

/// threadIdx.x, read again where called: nvcc would otherwise keep what stage derives from it
/// in registers from one tile to the next, and at D = 128 the forward had none to spare (ptxas
/// spilled 376 bytes with threadIdx.x, 20 with this, when it was written).
__device__ inline int fresh_thread_index() {
#if defined(ATTN_CUDA_EMULATOR)
  return int(threadIdx.x);
#else
  unsigned index;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(index));
  return int(index);
#endif
}

/// Copies rows [first, first + count) of x, rows d wide and row_stride apart (a head's rows:
/// core/fused_attention.hpp's head_rows), into s[tile_rows][stride<D>] as raw 16-bit numbers,
/// zeros past them (rows and columns): 16 bytes at a time when `vectors` (x, d and row_stride
/// whole 16 bytes: heads of d a multiple of 8 start on 16 bytes in either layout), and
/// those as async copies (async_copy.cuh) when `asynchronous`: the caller commits and waits. A
/// block's threads share the copies, a thread the same columns of every (threads / chunks)-th
/// row; every launch of these kernels has `warps` warps, which the division assumes.
template <int D, bool asynchronous = false, class T>
__device__ inline void stage(std::uint16_t* s, const T* x, index_t first, index_t count, index_t d, index_t row_stride,
                             bool vectors) {
  constexpr int chunks = D / 8, threads = warps * 32, rows_apart = threads / chunks;
  static_assert(threads % chunks == 0 && tile_rows % rows_apart == 0, "a thread's chunks: one column, whole rows");
  const int thread = fresh_thread_index();
  const int c = thread % chunks * 8, first_row = thread / chunks;
  if (vectors && count == tile_rows && d == D) {
    // A whole tile of rows D wide: the thread's copies at fixed offsets from one address (the
    // general loop below spent some 45 instructions a copy on indices and checks: as many, at
    // D = 64, as the forward's softmax and products together).
    // Offsets within a head's rows in 32 bits (the launcher's tensor_cores_address): with 64-bit
    // ones the run-time stride had cost 12 instructions more a tile of keys than a constant D
    // (sm_90 SASS), and a 64-bit product for the tile's first row and 32-bit ones within it 15.
    const int rows_stride = int(row_stride);
    const T* from = x + (int(first + first_row) * rows_stride + c);
    std::uint16_t* to = s + first_row * stride<D> + c;
#pragma unroll 1
    for (int r = 0; r < tile_rows; r += rows_apart, from += rows_apart * rows_stride, to += rows_apart * stride<D>) {
      if constexpr (asynchronous) async_copy::copy_16_bytes(to, from);
      else *reinterpret_cast<uint4*>(to) = *reinterpret_cast<const uint4*>(from);
    }
    return;
  }
#pragma unroll 1
  for (int r = first_row; r < tile_rows; r += rows_apart) {
    std::uint16_t* to = s + r * stride<D> + c;
    if (vectors && r < count && c + 8 <= d) {
      const T* const from = x + (int(first + r) * int(row_stride) + c);
      if constexpr (asynchronous) async_copy::copy_16_bytes(to, from);
      else *reinterpret_cast<uint4*>(to) = *reinterpret_cast<const uint4*>(from);
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k)
        to[k] = r < count && c + k < d ? x[int(first + r) * int(row_stride) + c + k].bits : std::uint16_t(0);
    }
  }
}

/// A modification's score, and dS by the unmodified score with the learned inputs' share added
/// at `input_gradients` (when not null): the query's slots, or where M's shares are held
/// (held_inputs), the query's sums, one an input, as device_score_modification::hold says. A
/// lane's 32 scores a tile are unrolled, so the code is inlined 32 times a loop where it is
/// inlined: for a modification of up to `inlined_cost` (plan_cost.cuh; ALiBi's), the code a
/// score is shorter than a call's moving of arguments, and a call cost more: the arguments'
/// stores and the plans' loads from the caller's stack, one call after the other, and the stack
/// frames of the registers it saves (ALiBi, sm_90, ptxas:
/// 120–200 bytes a thread in every kernel, 584 bytes of spill loads in dK/dV at D = 128;
/// inlined, 0 to 64 bytes). A costlier one is called out of line: inlined at each of the 32
/// scores, a soft cap's plans multiplied the kernels' code, and ptxas's time, by as much (the
/// linear-index plans of 2026-11-25, inlined, took the gpu test's build from 105 s to 15 min).
template <class M>
__device__ __forceinline__ float modified_score_here(const M& m, index_t b, index_t h, index_t i, index_t j,
                                                     float scaled) {
  return kernels::modified(m, b, h, i, j, scaled);
}
/// Where `counted` is false (dS is 0, or the row saw nothing) dS stays 0 and held shares gain 0,
/// whatever the derivative and the partials are there (∞ or NaN where dS is 0): selects, so that
/// an inlined modification takes every score of an unrolled tile without a branch. Shares added
/// to memory at each score keep their branch: a load and a store are worth skipping.
template <class M>
__device__ __forceinline__ float modified_score_gradient_here(const M& m, index_t b, index_t h, index_t i, index_t j,
                                                              float scaled, float d_score, float* input_gradients,
                                                              bool counted = true) {
  const score_position at{{b, h, i, j}};
  if (input_gradients != nullptr) {
    if constexpr (held_inputs<M>() > 0) m.hold(at, scaled, d_score, counted, input_gradients);
    else if (counted) m.accumulate(at, scaled, d_score, input_gradients);
  }
  return counted ? d_score * m.derivative(at, scaled) : 0.f;
}
template <class M>
ATTN_CUDA_NOINLINE __device__ float modified_score_call(const M& m, index_t b, index_t h, index_t i, index_t j,
                                                        float scaled) {
  return modified_score_here(m, b, h, i, j, scaled);
}
template <class M>
ATTN_CUDA_NOINLINE __device__ float modified_score_gradient_call(const M& m, index_t b, index_t h, index_t i,
                                                                 index_t j, float scaled, float d_score,
                                                                 float* input_gradients) {
  return modified_score_gradient_here(m, b, h, i, j, scaled, d_score, input_gradients);
}

/// Whether the kernels inline modification M's plans.
template <class M>
inline constexpr bool inlines = M::cost <= inlined_cost;

template <class M>
__device__ inline float modified_score(const M& m, index_t b, index_t h, index_t i, index_t j, float scaled) {
  if constexpr (inlines<M>) return modified_score_here(m, b, h, i, j, scaled);
  else return modified_score_call(m, b, h, i, j, scaled);
}
template <class M>
__device__ inline float modified_score_gradient(const M& m, index_t b, index_t h, index_t i, index_t j, float scaled,
                                                float d_score, float* input_gradients) {
  if constexpr (inlines<M>) return modified_score_gradient_here(m, b, h, i, j, scaled, d_score, input_gradients);
  else return modified_score_gradient_call(m, b, h, i, j, scaled, d_score, input_gradients);
}

/// Weight (b, h, i, j)'s dropout factor, out of line: the counter-based generator inlined at each
/// of a lane's 32 weights a tile took 70 of the forward kernel's 250 registers at D = 128, even
/// where dropout is off, and with them half its blocks a multiprocessor. The problem's members
/// come as values: a reference to the problem, a kernel parameter, had every thread copy it to
/// its stack (a 128-byte frame, whether or not dropout was on). The backward kernels' masked
/// tiles call it too: inlined there, its 64-bit hash and 1 / (1 − dropout) in doubles made up a
/// quarter to a third of each backward kernel's SASS (sm_90: 1 950 to 3 850 instructions), and
/// under ALiBi 64 calls of the double division's slow path and 220 more bytes spilled at D = 128.
ATTN_CUDA_NOINLINE __device__ inline float dropout_factor(random_stream stream, std::uint64_t start, double dropout,
                                                          index_t heads, index_t queries, index_t keys, index_t b,
                                                          index_t h, index_t i, index_t j) {
  return float(fused_attention_problem::kept_of(stream, start, dropout, heads, queries, keys, b, h, i, j));
}

/// Score (b, h, i, j) before any bias, from `scaled` (scale · q·k): the modification's of it.
template <class M>
__device__ inline float score_of(const M& modification, index_t b, index_t h, index_t i, index_t j, float scaled) {
  if constexpr (M::modifies) return modified_score(modification, b, h, i, j, scaled);
  else return scaled;
}

/// Whether the forward's softmax holds modification M's scores as they are (natural units, their
/// log2 e folded into each exponent's fma: a multiply a score less than scaling them first)
/// rather than times log2 e (unmodified: q·k times scale · log2 e, one multiply, and exp2 takes
/// differences).
template <class M>
inline constexpr bool natural_units = M::modifies;

/// Score (b, h, i, j) from q·k in the forward's softmax units (natural_units).
template <class M>
__device__ inline float softmax_score(const M& modification, index_t b, index_t h, index_t i, index_t j,
                                      float product, float scale) {
  if constexpr (natural_units<M>) return score_of(modification, b, h, i, j, product * scale);
  else return product * (scale * log2_e);
}

/// The lane's maximum over the four lanes of its row group.
__device__ inline float group_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float group_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/// Whether no mask can hide a pair of queries first_query … last_query and keys [key, key +
/// tile_rows): then the kernels skip the per-element checks.
template <class Rule>
__device__ inline bool unmasked(const fused_attention_problem& p, index_t first_query, index_t last_query,
                                index_t key, index_t key_end, const void* bias, const Rule& rule) {
  // The rule first, as a compile-time `every_pair` check was: asked last, the same answer had
  // the forward spill 172 bytes at D = 128 instead of 104, and dK/dV 32 instead of none (ptxas, sm_90).
  return rule_allows_every(rule, p.first_query + first_query, p.first_query + last_query, key, key + tile_rows - 1) &&
         !bias && last_query < p.queries && key + tile_rows <= key_end &&
         (!p.causal || key + tile_rows - 1 <= p.first_query + first_query);
}

/// Whether the launcher packs short sentences into blocks (block_sentences): yes, unless
/// ATTN_FUSED_PACKING=0 in the environment (benchmarks time both). Read by the host at each call.
inline bool& packs_sentences() {
  static bool on = on_unless_zero("ATTN_FUSED_PACKING");
  return on;
}

/// Row x of the rows from `first`, as a column of their tile: 0 before it, tile_rows past it.
__device__ inline int column_of(index_t x, index_t first) {
  return x <= first ? 0 : x - first < tile_rows ? int(x - first) : tile_rows;
}

/// A query row's place in a block (block_sentences::query_place_of): its sentence b and index i
/// there, and the block's keys it may see, from `keys_from` (its sentence's first) to `keys_end`
/// (padding's end and the causal rule; empty for a row past the block's).
struct query_place {
  index_t b, i, keys_from, keys_end;
};
/// A key row's place (block_sentences::key_place_of): its sentence b and index j there, where its
/// sentence's queries start among the block's (`queries_from`), and whether it is one of the
/// sentence's keys (before padding's end).
struct key_place {
  index_t b, j, queries_from;
  bool seen;
};

/// The sentences a block takes. Unpacked (`packs` false), one: the block's rows are rows of
/// sentence `first`. Packed, where the launcher packs them (fused_attention_launch::
/// sentences_a_block: the heads in rows, so that a head's rows of consecutive sentences lie one
/// row stride apart, and sentences short enough that two or more fill a tile), `packed` whole
/// sentences from `first` (fewer at the batch's end), one after the other: the block's query row
/// x is row x − s·queries of sentence first + s, s = x / queries, its key row y row y − s·keys of
/// sentence first + y / keys, and the pairs of two sentences are hidden as padding is. A block
/// then takes one tile of each (packed · queries and packed · keys at most tile_rows): a batch of
/// sentences of ten tokens had left 54 of each block's 64 rows idle, in as many blocks as
/// sentences and heads. A compile-time choice: the run-time one had cost the unpacked kernels
/// registers, and at D = 128 up to 232 bytes more spilled (sm_90, ptxas).
template <bool packs>
struct block_sentences {
  index_t first, count;

  /// Group `group` of `packed` sentences from sentence `from` (packed), or sentence from + group.
  /// Packed, the group ends at the batch's end: a launch that takes part of the batch (the dQ
  /// kernel's, with learned inputs) takes a multiple of `packed` sentences, but for the last.
  __device__ block_sentences(const fused_attention_problem& p, index_t packed, index_t group, index_t from = 0)
      : first(from + group * (packs ? packed : 1)),
        count(!packs ? 1 : p.batch - first < packed ? p.batch - first : packed) {}

  /// The end of the block's query rows, and of its key rows (not padding's end of a sentence's
  /// keys, the kernels' `key_end`).
  __device__ index_t query_rows_end(const fused_attention_problem& p) const {
    return packs ? count * p.queries : p.queries;
  }
  __device__ index_t key_rows_end(const fused_attention_problem& p) const { return packs ? count * p.keys : p.keys; }
  /// Which of the block's sentences row x lies in, its sentence's rows `length` long (count or
  /// more: past them).
  __device__ index_t sentence_of(index_t x, index_t length) const {
    if constexpr (packs) return index_t(int(x) / int(length));  // x < tile_rows
    else return 0;
  }

  /// Query row x's place; `key_end` is sentence first's end of keys.
  __device__ query_place query_place_of(const fused_attention_problem& p, index_t x, index_t key_end) const {
    const index_t s = sentence_of(x, p.queries), b = first + s, i = x - s * p.queries, from = s * p.keys;
    if ((packs && s >= count) || i >= p.queries) return {b, i, from, from};
    return {b, i, from, from + kernels::keys_seen(p, i, 1, packs && s > 0 ? kernels::key_end_of(p, b) : key_end)};
  }
  /// Key row y's place.
  __device__ key_place key_place_of(const fused_attention_problem& p, index_t y, index_t key_end) const {
    const index_t s = sentence_of(y, p.keys), b = first + s, j = y - s * p.keys;
    const bool seen = (!packs || s < count) && j < (packs && s > 0 ? kernels::key_end_of(p, b) : key_end);
    return {b, j, s * p.queries, seen};
  }
  /// The columns of a tile of keys from `key` that query row `row` may see; unpacked, from the
  /// tile's first (every row's keys start at 0).
  __device__ kernels::column_span key_columns(const query_place& row, index_t key) const {
    return {packs ? column_of(row.keys_from, key) : 0, column_of(row.keys_end, key)};
  }
  /// The columns of a tile of queries from `query` that may see key row `row`: its sentence's,
  /// from the first the causal rule lets see it (none past padding's end).
  __device__ kernels::column_span query_columns(const fused_attention_problem& p, const key_place& row,
                                                index_t query) const {
    if (!row.seen) return {0, 0};
    const index_t from = row.queries_from;
    // Packed, the causal rule's first query no earlier than the sentence's (j − first_query may be
    // negative); unpacked, a column before the tile's first is 0 anyway.
    const index_t causal_from = packs ? from + kernels::first_query_seeing(p, row.j) : row.j - p.first_query;
    return {p.causal ? column_of(causal_from, query) : packs ? column_of(from, query) : 0,
            column_of(from + p.queries, query)};
  }
  /// Where query row x's log-sum-exp and row terms are in [batch · heads · queries], for head h.
  __device__ index_t row_of(const fused_attention_problem& p, index_t h, index_t x) const {
    const index_t s = sentence_of(x, p.queries);
    return ((first + s) * p.heads + h) * p.queries + x - s * p.queries;
  }
};

/// scores += A·Xᵀ for the warp's 16 rows: A as D / 16 fragments, X the staged tile of tile_rows
/// rows (X's rows are the product's columns: keys against queries, or the reverse), its
/// fragments loaded two at a time.
template <class T, int D>
__device__ inline void multiply_add_by_rows(float (&scores)[tile_rows / 8][4], const mma::fragment_a (&a)[D / 16],
                                            const std::uint16_t* x) {
#pragma unroll
  for (int c = 0; c < D / 16; ++c)
#pragma unroll
    for (int n = 0; n < tile_rows / 8; n += 2) {
      mma::fragment_b block, next;
      mma::load_b_pair_from_rows(block, next, x + n * 8 * stride<D> + c * 16, stride<D>);
      mma::multiply_add<T>(scores[n], a[c], block);
      mma::multiply_add<T>(scores[n + 1], a[c], next);
    }
}

/// acc += W·X for the warp's 16 rows: W the 16 × tile_rows accumulators of an earlier product
/// (weights or score gradients), rounded to T as A fragments, X the staged tile (tile_rows × D),
/// its fragments loaded two at a time.
template <class T, int D>
__device__ inline void multiply_add_tile(float (&acc)[D / 8][4], const float (&w)[tile_rows / 8][4],
                                         const std::uint16_t* x) {
#pragma unroll
  for (int c = 0; c < tile_rows / 16; ++c) {
    mma::fragment_a a;
    mma::to_a<T>(a, w[2 * c], w[2 * c + 1]);
#pragma unroll
    for (int d = 0; d < D / 8; d += 2) {
      mma::fragment_b left, right;
      mma::load_b_transposed(left, right, x + c * 16 * stride<D> + d * 8, stride<D>);
      mma::multiply_add<T>(acc[d], a, left);
      mma::multiply_add<T>(acc[d + 1], a, right);
    }
  }
}

/// Writes the lane's two rows of acc (rows[r] < row_end, times factor[r]), columns below width,
/// into a head's rows `at` of out, rounded to T.
template <class T, int D>
__device__ inline void store_rows(T* out, head_rows at, index_t width, const float (&acc)[D / 8][4],
                                  const index_t (&rows)[2], index_t row_end, const float (&factor)[2]) {
  const int t = mma::in_group();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= row_end) continue;
#pragma unroll
    for (int d = 0; d < D / 8; ++d)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const index_t column = d * 8 + 2 * t + e;
        if (column < width) out[at.start + rows[r] * at.stride + column] = T(acc[d][2 * r + e] * factor[r]);
      }
  }
}

/// The key and value tiles [key, key + tile_rows) of one key/value head from `begin` (a
/// multiple of tile_rows) up to `end`, two at a time in `staged` ([2][keys, values][tile]): the
/// forward's and the dQ kernel's walk over the keys, the next tile copied while the block works
/// on the current one.
template <int D, class T>
struct key_value_tiles {
  std::uint16_t* staged;
  const T* k_head;  // the head's first row in k, and in v
  const T* v_head;
  index_t begin, end, d_k, d_v, k_stride, v_stride;
  bool k_vectors, v_vectors;

  static constexpr int tile = tile_rows * stride<D>;

  /// Starts copying the tile at `key` into its buffer.
  __device__ void prefetch(index_t key) const {
    std::uint16_t* const keys = keys_of(key);
    const index_t count = end - key < tile_rows ? end - key : tile_rows;
    stage<D, true>(keys, k_head, key, count, d_k, k_stride, k_vectors);
    stage<D, true>(keys + tile, v_head, key, count, d_v, v_stride, v_vectors);
    async_copy::commit();
  }
  /// Waits for the tile at `key` (every thread's copies, and every warp done with the tile
  /// before), starts copying the next one, and returns the tile's keys (its values follow them,
  /// `tile` numbers on).
  __device__ const std::uint16_t* wait_for(index_t key) const {
    async_copy::wait<0>();
    __syncthreads();  // this tile has landed, and no warp still reads the other buffer
    if (key + tile_rows < end) prefetch(key + tile_rows);
    return keys_of(key);
  }
  /// Where the tile at `key` lives: tiles alternate between the two buffers, the first tile in
  /// the first (the second holds the block's own rows until then).
  __device__ std::uint16_t* keys_of(index_t key) const {
    return staged + int((key - begin) / tile_rows % 2) * 2 * tile;
  }
};

/// Shared memory of forward and backward_queries: two tiles of keys and two of values, the next
/// pair landing while the block works on the current one (the second pair's place holds the
/// block's queries, and output gradients, at the start).
template <int D>
inline constexpr int key_value_tiles_bytes = 4 * tile_rows * stride<D> * 2;

/// Queries a block of the forward takes: 16 a warp. 32 a warp at D = 64 without a modification
/// (FlashAttention-2's 128-query blocks at 4 warps, each key and value fragment loaded from shared
/// memory feeding two products; from 2026-11-26's seventh session to commit fabef03) issued fewer
/// instructions a product, but on an H100 the forward ran 9-12 % slower with them at 512 tokens,
/// 3 % at 2048, and no faster beyond the run-to-run spread at 8192 and 16384 (docs/benchmarks.md,
/// "GPU: the fourth run").
template <int D, class M>
inline constexpr int forward_block_rows = 16 * warps;

/// Blocks a multiprocessor the forward is compiled for: three cap its registers at 168 (180
/// unbounded at D = 128, which allows two; a few spill): 1.2 times the speed at D = 128 on an H200
/// (docs/benchmarks.md, "GPU: the third run"), the same at 32 and 64, which fit three anyway. On
/// packed sentences at D = 128 two: held to 168, ptxas spilled 108 bytes (204 registers unbounded).
template <int D, bool packs>
inline constexpr int forward_blocks_a_multiprocessor = packs && D > 64 ? 2 : 3;

/// One step of the online softmax for the lane's two rows of a block of 16: `scores` (times
/// log2 e, or as they are where `natural`; −∞ where hidden) become the weights against the rows'
/// new maxima, and `acc` and the running sums are rescaled to them.
template <int D, bool natural>
__device__ inline void online_softmax(float (&scores)[tile_rows / 8][4], float (&acc)[D / 8][4],
                                      float (&running_max)[2], float (&running_sum)[2]) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < tile_rows / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], scores[n][e]);
  constexpr float to_log2 = natural ? log2_e : 1.f;
  float reference[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float new_max = fmaxf(running_max[r], group_max(tile_max[r]));
    reference[r] = new_max == -INFINITY ? 0.f : new_max;  // rows with nothing seen yet stay 0
    const float rescale = fast_exp2((running_max[r] - reference[r]) * to_log2);
    running_max[r] = new_max;
    running_sum[r] *= rescale;
#pragma unroll
    for (int d = 0; d < D / 8; ++d) acc[d][2 * r] *= rescale, acc[d][2 * r + 1] *= rescale;
  }
#pragma unroll
  for (int n = 0; n < tile_rows / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (natural) scores[n][e] = fast_exp2(fmaf(scores[n][e], log2_e, -reference[e / 2] * log2_e));
      else scores[n][e] = fast_exp2(scores[n][e] - reference[e / 2]);
      running_sum[e / 2] += scores[n][e];
    }
}

template <int D, class T, class Rule, class M, bool packs = false>
__global__ void __launch_bounds__(warps * 32, forward_blocks_a_multiprocessor<D, packs>)
    forward(fused_attention_problem p, const T* q, const T* k, const T* v, const T* bias, T* out, float* log_sum_exp,
            Rule rule, M modification, index_t packed) {
  constexpr int S = stride<D>, tile = tile_rows * S, block_rows = forward_block_rows<D, M>;
  static_assert(block_rows <= 2 * tile_rows, "the block's queries are staged in the second tiles' place");
  static_assert(block_rows >= tile_rows, "packed sentences: a tile's queries a block");
  std::uint16_t* const staged = dynamic_shared_memory<std::uint16_t>();  // [2][keys, values][tile]
  const block_sentences<packs> sentences(p, packed, blockIdx.z);
  const index_t b = sentences.first, h = blockIdx.y, first = index_t(blockIdx.x) * block_rows;
  const int warp = int(threadIdx.x) / 32, g = mma::group(), t = mma::in_group();
  const index_t warp_first = first + warp * 16;  // the warp's 16 queries from here
  const index_t rows[2] = {warp_first + g, warp_first + g + 8};  // the lane's two of them
  const kernels::heads_of at(p, b, h);
  const index_t key_end = kernels::key_end_of(p, b), query_end = sentences.query_rows_end(p);
  const index_span block_keys =
      packs ? index_span{0, sentences.key_rows_end(p)} : kernels::keys_seen(p, first, block_rows, key_end, rule, tile_rows);
  const bool k_vectors = p.d_k % 8 == 0 && aligned16(q) && aligned16(k), v_vectors = p.d_v % 8 == 0 && aligned16(v);
  const key_value_tiles<D, T> tiles{staged, k + at.k.start, v + at.v.start, block_keys.begin, block_keys.end,
                                    p.d_k,  p.d_v,          at.k.stride,    at.v.stride,      k_vectors,
                                    v_vectors};
  if (block_keys.begin < block_keys.end) tiles.prefetch(block_keys.begin);

  // The warp's queries, as A fragments of D / 16 column blocks, through shared memory.
  mma::fragment_a query[D / 16];
  std::uint16_t* const block_queries = staged + 2 * tile;  // the second buffer, until the first prefetch
#pragma unroll
  for (int part = 0; part < block_rows / tile_rows; ++part) {
    const index_t from = first + part * tile_rows;
    stage<D>(block_queries + part * tile, q + at.q.start, from,
             query_end - from < tile_rows ? query_end - from : tile_rows, p.d_k, at.q.stride, k_vectors);
  }
  __syncthreads();
#pragma unroll
  for (int c = 0; c < D / 16; ++c) mma::load_a(query[c], block_queries + warp * 16 * S + c * 16, S);

  float acc[D / 8][4] = {};
  // Of scores in the softmax's units (natural_units); the lane's share.
  constexpr bool natural = natural_units<M>;
  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0, 0};
  const float scale = float(p.scale);
  for (index_t key = block_keys.begin; key < block_keys.end; key += tile_rows) {
    const std::uint16_t* const keys = tiles.wait_for(key);
    const std::uint16_t* const values = keys + tile;

    float scores[tile_rows / 8][4] = {};
    multiply_add_by_rows<T, D>(scores, query, keys);

    // The scores in the softmax's units, -∞ where hidden: checked pair by pair only on tiles that a mask
    // can touch. A check or a branch a score, on tiles none can, had cost the forward as many
    // instructions as its products (sm_90 SASS; docs/fused-attention.md).
    if (!packs && unmasked(p, warp_first, warp_first + 15, key, key_end, bias, rule)) {
#pragma unroll
      for (int n = 0; n < tile_rows / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          scores[n][e] =
              softmax_score(modification, b, h, rows[e / 2], key + n * 8 + 2 * t + e % 2, scores[n][e], scale);
    } else {
      // Padding, the causal rule and the sentence's end among packed ones bound a row: a column
      // compared with the row's span; a rule and a bias asked pair by pair, at the pair's place
      // in its sentence.
      const query_place row[2] = {sentences.query_place_of(p, rows[0], key_end),
                                  sentences.query_place_of(p, rows[1], key_end)};
      const kernels::column_span seen[2] = {sentences.key_columns(row[0], key), sentences.key_columns(row[1], key)};
#pragma unroll
      for (int n = 0; n < tile_rows / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int column = n * 8 + 2 * t + e % 2;
          const query_place& at_row = row[e / 2];
          // Unpacked, the place spelled out, as in the dQ kernel.
          const index_t pair_b = packs ? at_row.b : b, i = packs ? at_row.i : rows[e / 2];
          const index_t j = packs ? key + column - at_row.keys_from : key + column;
          float s = -INFINITY;
          if (column >= seen[e / 2].begin && column < seen[e / 2].end &&
              kernels::rule_and_bias_allow(p, pair_b, i, j, bias, rule)) {
            s = softmax_score(modification, pair_b, h, i, j, scores[n][e], scale);
            if (bias) s += float(bias[(pair_b * p.queries + i) * p.keys + j]) * (natural ? 1.f : log2_e);
          }
          scores[n][e] = s;
        }
    }
    online_softmax<D, natural>(scores, acc, running_max, running_sum);
    // After the sums: dropout acts on softmax's output, whose normaliser counts every weight.
    if (p.dropout > 0) {
      const query_place row[2] = {sentences.query_place_of(p, rows[0], key_end),
                                  sentences.query_place_of(p, rows[1], key_end)};
#pragma unroll
      for (int n = 0; n < tile_rows / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const query_place& at_row = row[e / 2];
          const index_t j = key + n * 8 + 2 * t + e % 2;
          scores[n][e] *= packs ? dropout_factor(p.dropout_stream, p.dropout_start, p.dropout, p.heads, p.queries,
                                                 p.keys, at_row.b, h, at_row.i, j - at_row.keys_from)
                                : dropout_factor(p.dropout_stream, p.dropout_start, p.dropout, p.heads, p.queries,
                                                 p.keys, b, h, rows[e / 2], j);
        }
    }

    multiply_add_tile<T, D>(acc, scores, values);  // O += P·V
  }

  float inverse_sum[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float sum = group_sum(running_sum[half]);
    inverse_sum[half] = sum > 0 ? 1 / sum : 0.f;  // 0: a row with no visible key
    const float lse = natural ? running_max[half] + log2f(sum) * ln_2 : (running_max[half] + log2f(sum)) * ln_2;
    if (t == 0 && rows[half] < query_end) log_sum_exp[sentences.row_of(p, h, rows[half])] = sum > 0 ? lse : -INFINITY;
  }
  store_rows<T, D>(out, at.out, p.d_v, acc, rows, query_end, inverse_sum);
}

/// The weight P (dropped out) and the score gradient dS of a pair of query i and key j: dS by
/// the product q·k (scale times dS by the score), as the products dK += dSᵀ·Q and dQ += dS·K take it.
struct pair_gradient {
  float weight = 0, d_score = 0;
};

/// What row_terms multiplies each row's D = rowsum(dO ⊙ O) by for the backward under
/// modification M: unmodified, the scale, so that scale · dS = P·(scale · dP − scale · D) is one
/// fma a pair (seen_pair_gradient); under a modification 1, as its derivative and its learned
/// inputs' shares take dS by the modified score, before the scale.
template <class M>
inline float dot_factor(double scale) {
  return M::modifies ? 1.f : float(scale);
}

/// The backward's terms of each query row, once a row before its kernels: D = rowsum(dO ⊙ O)
/// times `factor` (dot_factor), and the row's log-sum-exp times log2 e, +∞ for a row that saw
/// nothing (lse −∞: every score −∞, a modification's or a product past float's range), so that
/// each of its weights, 2^(s · log2 e − that), is 0 without a check a pair.
template <class T>
__global__ void row_terms(fused_attention_problem p, const T* d_out, const T* out, const float* log_sum_exp,
                          float factor, float* dots, float* log2_sum_exp, index_t rows) {
  const index_t r = index_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  dots[r] = kernels::row_dot(p, d_out, out, r) * factor;
  log2_sum_exp[r] = log_sum_exp[r] == -INFINITY ? INFINITY : log_sum_exp[r] * log2_e;
}

/// P and dS of a pair that query i sees. The weight is 2^(s · to_log2 − lse2), one fma and an
/// exp2: `s` the pair's score (modified, a bias added) and to_log2 log2 e, or, unmodified
/// without a bias, q·k itself and scale · log2 e; lse2 the row's log-sum-exp times log2 e (+∞
/// where it saw nothing: row_terms). `kept` is the dropout factor, dP = dO·v, `dot` D times
/// dot_factor<M>. Unmodified, dS by q·k is P·(scale · kept · dP − scale · D), one fma more. Under
/// a modification, dS by the modified score goes through its derivative by its input `scaled`
/// (scale · q·k), its learned inputs' share added at `input_gradients` (the dQ kernel's, as
/// modified_score_gradient says; null in dK and dV's), then times the scale.
template <class M>
__device__ inline pair_gradient seen_pair_gradient(const M& modification, index_t b, index_t h, index_t i, index_t j,
                                                   float scaled, float s, float to_log2, float kept, float d_weight,
                                                   float lse2, float dot, float scale,
                                                   [[maybe_unused]] float* input_gradients) {
  pair_gradient g;
  if constexpr (M::modifies) {
    // No derivative at all for a row that saw nothing (0 · an infinite dP would be NaN there, and
    // its gradient would spread it), as on its masked tiles; and, as the CPU, none where dS is 0
    // (the derivative may be ∞ or NaN there).
    const bool seen = lse2 != INFINITY;
    if constexpr (!inlines<M>) {
      if (!seen) return g;
    }
    const float probability = fast_exp2(fmaf(s, to_log2, -lse2));
    const float d_score = probability * (d_weight * kept - dot);
    if constexpr (inlines<M>) {
      // Inlined, both rules are selects: a branch at each of a lane's 32 scores a tile had cost
      // four instructions a score and cut the tile into 32 blocks for nvcc to schedule one by one.
      g.weight = seen ? probability * kept : 0.f;
      g.d_score = scale * modified_score_gradient_here(modification, b, h, i, j, scaled, d_score, input_gradients,
                                                       seen && d_score != 0.f);
    } else {
      g.weight = probability * kept;
      if (d_score != 0.f)
        g.d_score = scale * modified_score_gradient(modification, b, h, i, j, scaled, d_score, input_gradients);
    }
  } else {
    const float probability = fast_exp2(fmaf(s, to_log2, -lse2));
    g.weight = probability * kept;
    g.d_score = probability * fmaf(d_weight, scale * kept, -dot);
  }
  return g;
}

/// P and dS of query i and key j on a tile that a mask or dropout may touch: both 0 where the
/// pair is hidden (`in_row`: padding and the causal rule leave it, as the caller counted) or the
/// query sees nothing.
template <class T, class Rule, class M>
__device__ inline pair_gradient gradient_of(const fused_attention_problem& p, index_t b, index_t h, index_t i,
                                            index_t j, bool in_row, const T* bias, const Rule& rule,
                                            const M& modification, float product, float d_weight, float lse2,
                                            float dot, float* input_gradients) {
  if (lse2 == INFINITY || !in_row || !kernels::rule_and_bias_allow(p, b, i, j, bias, rule)) return {};
  const float scale = float(p.scale), scaled = product * scale;
  float s = score_of(modification, b, h, i, j, scaled);
  if (bias) s += float(bias[(b * p.queries + i) * p.keys + j]);
  const float kept = p.dropout > 0 ? dropout_factor(p.dropout_stream, p.dropout_start, p.dropout, p.heads, p.queries,
                                                   p.keys, b, h, i, j)
                                  : 1.f;
  return seen_pair_gradient(modification, b, h, i, j, scaled, s, log2_e, kept, d_weight, lse2, dot, scale,
                            input_gradients);
}

/// P and dS of query i and key j on a tile that neither a mask nor dropout touches: no checks,
/// no branches (they had cost the backward kernels more instructions than their products).
template <class M>
__device__ inline pair_gradient unmasked_gradient(const M& modification, index_t b, index_t h, index_t i, index_t j,
                                                  float product, float scale, float d_weight, float lse2, float dot,
                                                  float* input_gradients) {
  if constexpr (M::modifies) {
    const float scaled = product * scale;
    return seen_pair_gradient(modification, b, h, i, j, scaled, score_of(modification, b, h, i, j, scaled), log2_e,
                              1.f, d_weight, lse2, dot, scale, input_gradients);
  } else {
    return seen_pair_gradient(modification, b, h, i, j, 0.f, product, scale * log2_e, 1.f, d_weight, lse2, dot, scale,
                              input_gradients);
  }
}

/// 16-bit elements a stage of backward_keys takes: a tile of queries and one of output
/// gradients, then their rows' log-sum-exps and dots (floats: two numbers each).
template <int D>
inline constexpr int query_stage_elements = 2 * tile_rows * stride<D> + 4 * tile_rows;

/// Shared memory of backward_keys: the block's keys and values, then two stages, the next query
/// tile landing while the block works on the current one; when it sums dQ too, the tile's score
/// gradients dSᵀ after them ([block_rows][stride<tile_rows>]).
template <int D, bool sums_queries = false>
inline constexpr int backward_keys_bytes =
    (2 * tile_rows * stride<D> + 2 * query_stage_elements<D> + (sums_queries ? block_rows * stride<tile_rows> : 0)) * 2;

/// Columns of dQ a warp of backward_keys sums at a time: 32 (16 floats a lane), so that its
/// accumulators fit beside dK's and dV's at D = 128.
inline constexpr int query_gradient_columns = 32;

/// Adds x and y to the floats at `at` and after it (columns c and c + 1 of a row: c + 1 only when
/// `both`): one 8-byte atomic where the GPU has them (compute capability 9.0) and `at` is 8-byte
/// aligned (`pair_aligned`), two 4-byte ones elsewhere.
__device__ inline void add_two(float* at, float x, float y, bool both, bool pair_aligned) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (both && pair_aligned) {
    atomicAdd(reinterpret_cast<float2*>(at), float2{x, y});
    return;
  }
#endif
  (void)pair_aligned;
  atomicAdd(at, x);
  if (both) atomicAdd(at + 1, y);
}

/// dQ of a query tile from backward_keys' block: the warp's 16 queries (16·warp …) of dS·K over
/// the block's keys, dS from `d_scores` (dSᵀ, [keys][queries]) and K from `keys` ([keys][D]),
/// added into `sums` (rows row_stride apart from the tile's first query; rows below `count`,
/// columns below `width`), query_gradient_columns columns at a time.
template <class T, int D>
__device__ inline void add_query_gradients(float* sums, index_t count, index_t width, index_t row_stride,
                                           const std::uint16_t* d_scores, const std::uint16_t* keys) {
  constexpr int SQ = stride<tile_rows>, columns = D < query_gradient_columns ? D : query_gradient_columns;
  const int warp = int(threadIdx.x) / 32, g = mma::group(), t = mma::in_group();
  mma::fragment_a d_score[block_rows / 16];  // dS for the warp's queries, 16 keys a fragment
#pragma unroll
  for (int c = 0; c < block_rows / 16; ++c) mma::load_a_transposed(d_score[c], d_scores + c * 16 * SQ + warp * 16, SQ);
  // Rows within the tile, under 64: 32-bit arithmetic (their offsets, row_stride apart, 64-bit).
  const int rows[2] = {warp * 16 + g, warp * 16 + g + 8};
  const bool pair_aligned = width % 2 == 0 && row_stride % 2 == 0 && reinterpret_cast<std::uintptr_t>(sums) % 8 == 0;
  // The warp's 16 rows all there and D columns wide: each pair is added at its row's address
  // plus an offset fixed when compiled, unchecked. Checked, with its address in 64 bits, a pair
  // had cost about 20 instructions (sm_90 SASS): 160 a lane for each 32 columns, against their
  // 16 products (benchmarks.md, "GPU kernels read, not timed (7)").
  const bool whole_rows = width == D && count >= warp * 16 + 16 && pair_aligned;
#pragma unroll 1
  for (int first = 0; first < D && first < width; first += columns) {
    float dq[columns / 8][4] = {};
#pragma unroll
    for (int c = 0; c < block_rows / 16; ++c)
#pragma unroll
      for (int d = 0; d < columns / 8; d += 2) {
        mma::fragment_b left, right;
        mma::load_b_transposed(left, right, keys + c * 16 * stride<D> + first + d * 8, stride<D>);
        mma::multiply_add<T>(dq[d], d_score[c], left);
        mma::multiply_add<T>(dq[d + 1], d_score[c], right);
      }
    if (whole_rows) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float* const row = sums + rows[r] * row_stride + first + 2 * t;
#pragma unroll
        for (int d = 0; d < columns / 8; ++d) add_two(row + d * 8, dq[d][2 * r], dq[d][2 * r + 1], true, true);
      }
      continue;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (rows[r] >= count) continue;
#pragma unroll
      for (int d = 0; d < columns / 8; ++d) {
        const int column = first + d * 8 + 2 * t;
        if (column < width)
          add_two(sums + rows[r] * row_stride + column, dq[d][2 * r], dq[d][2 * r + 1], column + 1 < width,
                  pair_aligned);
      }
    }
  }
}

/// Blocks of backward_keys a multiprocessor that ptxas is held to: at D = 32 three, as before
/// dropout_factor's call, whose registers had taken the dQ-summing kernel from 168 to 212 (two
/// blocks). Held to 168 (sm_90), the plain kernels spill nothing, nor the key band's; ALiBi's
/// 8 bytes at most. Wider heads need every register. On packed sentences two at D = 32: held to
/// 168, ptxas spilled 212 bytes (128 with the dQ sums); with two, 214 registers and none.
template <int D, bool packs>
inline constexpr int backward_keys_blocks_a_multiprocessor = D <= 32 ? (packs ? 2 : 3) : 1;

/// dK and dV of 64 keys of one key/value head, over every query of the heads that read them.
/// With `sums_queries` (FlashAttention-2's backward), dQ too: each query tile's dQ += dS·K over the
/// block's keys, added with atomics into `d_q_sums` (float, [rows, d_k], zeroed before), which
/// saves the dQ kernel's two products a tile (S and dP again) for one; the sums' order, and so
/// their last bits, then depend on the order the blocks finish in.
template <int D, class T, class Rule, class M, bool sums_queries = false, bool packs = false>
__global__ void __launch_bounds__(warps * 32, backward_keys_blocks_a_multiprocessor<D, packs>)
    backward_keys(fused_attention_problem p, const T* q, const T* k, const T* v, const T* bias, const T* d_out,
                  const float* log2_sum_exp, const float* dots, T* d_k, T* d_v, Rule rule, M modification,
                  float* d_q_sums, index_t packed) {
  constexpr int S = stride<D>, tile = tile_rows * S;
  std::uint16_t* const keys = dynamic_shared_memory<std::uint16_t>();
  std::uint16_t* const values = keys + tile;
  std::uint16_t* const stages = values + tile;  // [2][queries, d_outs, log-sum-exps, dots]
  std::uint16_t* const d_scores = stages + 2 * query_stage_elements<D>;  // [keys][queries], sums_queries

  const block_sentences<packs> sentences(p, packed, blockIdx.z);
  const index_t b = sentences.first, kv_head = blockIdx.y, first_key = index_t(blockIdx.x) * block_rows;
  const int warp = int(threadIdx.x) / 32, g = mma::group(), t = mma::in_group();
  const index_t rows[2] = {first_key + warp * 16 + g, first_key + warp * 16 + g + 8};  // the lane's keys
  const index_t key_end = kernels::key_end_of(p, b);
  const index_t query_end = sentences.query_rows_end(p), key_row_end = sentences.key_rows_end(p);
  const head_rows key_head = p.k_rows(b, kv_head), value_head = p.v_rows(b, kv_head);
  const bool k_vectors = p.d_k % 8 == 0 && aligned16(q) && aligned16(k);
  const bool v_vectors = p.d_v % 8 == 0 && aligned16(v) && aligned16(d_out);
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  const float scale = float(p.scale);
  const index_t group = p.heads / p.kv_heads;
  // The query tiles, head after head of the group, as one sequence: step n reads tile
  // n % query_tiles of head first_head + n / query_tiles. Keys past the sentence's end are seen
  // by no query: no steps, and their gradients are 0 (packed, a block's sentences take the
  // steps, and such a key's pairs are hidden in them).
  const index_t first_head = kv_head * group;
  const index_span block_queries =
      packs ? index_span{0, query_end} : kernels::queries_seeing(p, first_key, block_rows, rule, tile_rows);
  const index_t first_tile = block_queries.begin;
  const index_t query_tiles =
      first_tile < block_queries.end ? (block_queries.end - first_tile + tile_rows - 1) / tile_rows : 0;
  const std::uint32_t steps = packs || first_key < key_end ? std::uint32_t(group * query_tiles) : 0;
  // Recomputed where used rather than carried from step to step: at D = 128 this kernel has no
  // registers to spare (two carried indices made ptxas spill). A step's head and tile by a
  // multiply-high (steps < 2³²: the launcher's check), not a division at every step.
  const fast_divider by_query_tiles = fast_divider::of(std::uint32_t(query_tiles > 0 ? query_tiles : 1));
  struct place {
    index_t head, query;  // the step's head, and its tile's first query
  };
  const auto place_of = [&](std::uint32_t step) {
    const std::uint32_t n = by_query_tiles.quotient(step);
    return place{first_head + index_t(n), first_tile + index_t(by_query_tiles.remainder(step, n)) * tile_rows};
  };
  const auto stage_queries = [&](std::uint32_t step, int buffer) {
    const place at = place_of(step);
    const index_t h = at.head, query = at.query;
    const index_t count = query_end - query < tile_rows ? query_end - query : tile_rows;
    std::uint16_t* const to = stages + buffer * query_stage_elements<D>;
    const head_rows query_head = p.q_rows(b, h), d_out_head = p.out_rows(b, h);
    stage<D, true>(to, q + query_head.start, query, count, p.d_k, query_head.stride, k_vectors);
    stage<D, true>(to + tile, d_out + d_out_head.start, query, count, p.d_v, d_out_head.stride, v_vectors);
    float* const lse_tile = reinterpret_cast<float*>(to + 2 * tile);
    float* const dots_tile = lse_tile + tile_rows;
    for (int r = int(threadIdx.x); r < tile_rows; r += int(blockDim.x)) {
      if (r < count) {
        const index_t row = sentences.row_of(p, h, query + r);
        async_copy::copy_4_bytes(lse_tile + r, log2_sum_exp + row);
        async_copy::copy_4_bytes(dots_tile + r, dots + row);
      } else {
        lse_tile[r] = INFINITY, dots_tile[r] = 0.f;  // rows past the end see nothing
      }
    }
  };
  if (steps > 0) {  // (a block must not leave with copies in flight)
    const index_t block_keys = key_row_end - first_key < block_rows ? key_row_end - first_key : block_rows;
    stage<D, true>(keys, k + key_head.start, first_key, block_keys, p.d_k, key_head.stride, k_vectors);
    stage<D, true>(values, v + value_head.start, first_key, block_keys, p.d_v, value_head.stride, v_vectors);
    stage_queries(0, 0);
    async_copy::commit();
  }

  for (std::uint32_t step = 0; step < steps; ++step) {
    const int buffer = int(step % 2);
    async_copy::wait<0>();
    __syncthreads();  // this stage has landed, and no warp still reads the other one
    if (step + 1 < steps) {
      stage_queries(step + 1, 1 - buffer);
      async_copy::commit();
    }
    const place at = place_of(step);
    const index_t h = at.head, query = at.query;
    const std::uint16_t* const queries = stages + buffer * query_stage_elements<D>;
    const std::uint16_t* const d_outs = queries + tile;
    const float* const lse_tile = reinterpret_cast<const float*>(d_outs + tile);
    const float* const dots_tile = lse_tile + tile_rows;

    // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for the warp's 16 keys and the tile's 64 queries.
    float scores[tile_rows / 8][4] = {}, d_weights[tile_rows / 8][4] = {};
#pragma unroll
    for (int c = 0; c < D / 16; ++c) {
      mma::fragment_a key_block, value_block;
      // The same fragments every step (the warp's keys and values), loaded again at each: kept,
      // they would take 8 · D / 16 registers more, which dK/dV does not have past D = 32.
      mma::load_a_blocks(key_block, keys + warp * 16 * S + c * 16, S);
      mma::load_a_blocks(value_block, values + warp * 16 * S + c * 16, S);
#pragma unroll
      for (int n = 0; n < tile_rows / 8; n += 2) {
        mma::fragment_b query_block, next_query_block, d_out_block, next_d_out_block;
        mma::load_b_pair_from_rows(query_block, next_query_block, queries + n * 8 * S + c * 16, S);
        mma::load_b_pair_from_rows(d_out_block, next_d_out_block, d_outs + n * 8 * S + c * 16, S);
        mma::multiply_add<T>(scores[n], key_block, query_block);
        mma::multiply_add<T>(scores[n + 1], key_block, next_query_block);
        mma::multiply_add<T>(d_weights[n], value_block, d_out_block);
        mma::multiply_add<T>(d_weights[n + 1], value_block, next_d_out_block);
      }
    }
    // Pᵀ (dropped out) into scores, scale · dSᵀ into d_weights; pair by pair checks only on tiles
    // that a mask or dropout can touch.
    const auto each_pair = [&](auto gradient) {
#pragma unroll
      for (int n = 0; n < tile_rows / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int column = n * 8 + 2 * t + e % 2;
          const pair_gradient g = gradient(column, e / 2, scores[n][e], d_weights[n][e], lse_tile[column],
                                           dots_tile[column]);
          scores[n][e] = g.weight;
          d_weights[n][e] = g.d_score;
        }
    };
    if (!packs && unmasked(p, query, query + tile_rows - 1, first_key, key_end, bias, rule) &&
        !(p.dropout > 0)) {
      each_pair([&](int column, int r, float product, float d_weight, float lse2, float dot) {
        return unmasked_gradient(modification, b, h, query + column, rows[r], product, scale, d_weight,
                                 lse2, dot, nullptr);
      });
    } else {
      // The queries that padding, the causal rule and the sentence's bounds among packed ones
      // let see each of the lane's keys.
      const key_place key_row[2] = {sentences.key_place_of(p, rows[0], key_end),
                                    sentences.key_place_of(p, rows[1], key_end)};
      const kernels::column_span seeing[2] = {sentences.query_columns(p, key_row[0], query),
                                              sentences.query_columns(p, key_row[1], query)};
      each_pair([&](int column, int r, float product, float d_weight, float lse2, float dot) {
        const bool in_row = column >= seeing[r].begin && column < seeing[r].end;
        if constexpr (!packs)  // as in the dQ kernel
          return gradient_of(p, b, h, query + column, rows[r], in_row, bias, rule, modification, product, d_weight,
                             lse2, dot, nullptr);
        return gradient_of(p, key_row[r].b, h, query + column - key_row[r].queries_from, key_row[r].j, in_row, bias,
                           rule, modification, product, d_weight, lse2, dot, nullptr);
      });
    }
    if constexpr (sums_queries) {
      // scale · dSᵀ, rounded to T as the dK product takes it, into shared memory, the warp's 16
      // keys a row each: lane (g, t) holds queries 2t, 2t + 1 of each 8 (conflict-free stores).
      constexpr int SQ = stride<tile_rows>;
#pragma unroll
      for (int n = 0; n < tile_rows / 8; ++n) {
        std::uint16_t* const at = d_scores + (warp * 16 + g) * SQ + n * 8 + 2 * t;
        mma::store_pair(at, mma::pack<T>(d_weights[n][0], d_weights[n][1]));
        mma::store_pair(at + 8 * SQ, mma::pack<T>(d_weights[n][2], d_weights[n][3]));
      }
    }
    multiply_add_tile<T, D>(dv, scores, d_outs);      // dV += Pᵀ·dO
    multiply_add_tile<T, D>(dk, d_weights, queries);  // dK += dSᵀ·Q
    if constexpr (sums_queries) {
      __syncthreads();  // every warp's dSᵀ rows are in (the next step's barrier keeps them until read)
      const head_rows sums = p.q_rows(b, h);  // laid out as dQ
      add_query_gradients<T, D>(d_q_sums + sums.start + query * sums.stride, query_end - query, p.d_k, sums.stride,
                                d_scores, keys);
    }
  }
  const float unscaled[2] = {1, 1};
  store_rows<T, D>(d_k, key_head, p.d_k, dk, rows, key_row_end, unscaled);
  store_rows<T, D>(d_v, value_head, p.d_v, dv, rows, key_row_end, unscaled);
}

/// Slots of a query row's share of a modification's learned inputs' gradients: one a lane of
/// the row's group (lanes 4g … 4g + 3 hold columns 2t, 2t + 1 of rows g and g + 8), so that no
/// two lanes add to one number.
inline constexpr int gradient_slots = 4;

/// dQ of 64 queries of one head, over every key they see; sentences from first_sentence on, one
/// a grid row. With a modification whose inputs learn, each lane adds its share of their
/// gradients into its own slot of its rows in `input_gradients`, which holds the launch's rows
/// (zeros at first): at each score, or once a row from sums it holds (held_inputs).
template <int D, class T, class Rule, class M, bool packs = false>
__global__ void __launch_bounds__(warps * 32)
    backward_queries(fused_attention_problem p, const T* q, const T* k, const T* v, const T* bias, const T* d_out,
                     const float* log2_sum_exp, const float* dots, T* d_q, Rule rule, M modification,
                     float* input_gradients, index_t first_sentence, index_t packed) {
  constexpr int S = stride<D>, tile = tile_rows * S;
  std::uint16_t* const staged = dynamic_shared_memory<std::uint16_t>();  // [2][keys, values][tile]
  const block_sentences<packs> sentences(p, packed, blockIdx.z, first_sentence);
  const index_t b = sentences.first, h = blockIdx.y, first = index_t(blockIdx.x) * block_rows;
  const int warp = int(threadIdx.x) / 32, g = mma::group(), t = mma::in_group();
  const index_t rows[2] = {first + warp * 16 + g, first + warp * 16 + g + 8};
  const kernels::heads_of at(p, b, h);
  const index_t key_end = kernels::key_end_of(p, b), query_end = sentences.query_rows_end(p);
  const index_span block_keys =
      packs ? index_span{0, sentences.key_rows_end(p)} : kernels::keys_seen(p, first, block_rows, key_end, rule, tile_rows);
  const bool k_vectors = p.d_k % 8 == 0 && aligned16(q) && aligned16(k);
  const bool v_vectors = p.d_v % 8 == 0 && aligned16(v) && aligned16(d_out);
  const key_value_tiles<D, T> tiles{staged,      k + at.k.start, v + at.v.start, block_keys.begin, block_keys.end,
                                    p.d_k,       p.d_v,          at.k.stride,    at.v.stride,      k_vectors,
                                    v_vectors};
  if (block_keys.begin < block_keys.end) tiles.prefetch(block_keys.begin);

  // The warp's queries and output gradients as A fragments, through shared memory.
  mma::fragment_a query[D / 16], d_output[D / 16];
  const index_t query_count = query_end - first < block_rows ? query_end - first : block_rows;
  std::uint16_t* const block_queries = staged + 2 * tile;  // the second buffer, until the first prefetch
  std::uint16_t* const block_d_outs = staged + 3 * tile;
  stage<D>(block_queries, q + at.q.start, first, query_count, p.d_k, at.q.stride, k_vectors);
  stage<D>(block_d_outs, d_out + at.out.start, first, query_count, p.d_v, at.out.stride, v_vectors);
  __syncthreads();
#pragma unroll
  for (int c = 0; c < D / 16; ++c) {
    mma::load_a(query[c], block_queries + warp * 16 * S + c * 16, S);
    mma::load_a(d_output[c], block_d_outs + warp * 16 * S + c * 16, S);
  }
  float lse2[2], dot[2];  // row_terms'
  float* slot[2] = {nullptr, nullptr};  // the lane's share of its rows' learned gradients
  // The same, held: in registers where the modification is inlined, on the stack (in the L1
  // cache, not written through to memory as a slot's adds are) where it is called.
  constexpr int held = held_inputs<M>();
  float sums[2][held > 0 ? held : 1] = {};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const index_t row = sentences.row_of(p, h, rows[r]);
    lse2[r] = rows[r] < query_end ? log2_sum_exp[row] : INFINITY;
    dot[r] = rows[r] < query_end ? dots[row] : 0.f;
    if constexpr (M::modifies)
      if (input_gradients != nullptr && rows[r] < query_end)
        slot[r] = input_gradients +
                  ((row - first_sentence * p.heads * p.queries) * gradient_slots + t) * modification.size;
  }

  float dq[D / 8][4] = {};
  const float scale = float(p.scale);
  for (index_t key = block_keys.begin; key < block_keys.end; key += tile_rows) {
    const std::uint16_t* const keys = tiles.wait_for(key);
    const std::uint16_t* const values = keys + tile;

    float scores[tile_rows / 8][4] = {}, d_weights[tile_rows / 8][4] = {};
    multiply_add_by_rows<T, D>(scores, query, keys);          // S = Q·Kᵀ
    multiply_add_by_rows<T, D>(d_weights, d_output, values);  // dP = dO·Vᵀ
    // scale · dS into scores; pair by pair checks only on tiles that a mask or dropout can touch.
    const auto each_pair = [&](auto gradient) {
#pragma unroll
      for (int n = 0; n < tile_rows / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e / 2;
          const pair_gradient g = gradient(n * 8 + 2 * t + e % 2, r, scores[n][e], d_weights[n][e], lse2[r], dot[r]);
          scores[n][e] = g.d_score;
        }
    };
    const index_t warp_first = first + warp * 16;
    // Where a row's shares are held, they go to its sums whether or not the row has a slot.
    const auto sink = [&](int r) { return held > 0 ? sums[r] : slot[r]; };
    if (!packs && unmasked(p, warp_first, warp_first + 15, key, key_end, bias, rule) && !(p.dropout > 0)) {
      each_pair([&](int column, int r, float product, float d_weight, float lse2, float dot) {
        return unmasked_gradient(modification, b, h, rows[r], key + column, product, scale, d_weight,
                                 lse2, dot, sink(r));
      });
    } else {
      // The keys that padding, the causal rule and the sentence's bounds among packed ones let
      // each of the lane's queries see.
      const query_place row[2] = {sentences.query_place_of(p, rows[0], key_end),
                                  sentences.query_place_of(p, rows[1], key_end)};
      const kernels::column_span seen[2] = {sentences.key_columns(row[0], key), sentences.key_columns(row[1], key)};
      each_pair([&](int column, int r, float product, float d_weight, float lse2, float dot) {
        const bool in_row = column >= seen[r].begin && column < seen[r].end;
        // Unpacked, the row's place spelled out: through the row's fields ptxas had given this
        // kernel 40 registers more at D = 32 (sm_90).
        if constexpr (!packs)
          return gradient_of(p, b, h, rows[r], key + column, in_row, bias, rule, modification, product, d_weight, lse2,
                             dot, sink(r));
        return gradient_of(p, row[r].b, h, row[r].i, key + column - row[r].keys_from, in_row, bias, rule,
                           modification, product, d_weight, lse2, dot, sink(r));
      });
    }
    multiply_add_tile<T, D>(dq, scores, keys);  // dQ += scale · dS·K
  }
  if constexpr (held > 0) {
    // The slot held zeros: adding each sum once gives the bits that adding each share did.
#pragma unroll
    for (int r = 0; r < 2; ++r)
      if (slot[r] != nullptr) {
        // At any of the row's keys (a held input's element is the same along them): the block's
        // first, or its sentence's where packed.
        const query_place row = sentences.query_place_of(p, rows[r], key_end);
        modification.add_held(score_position{{row.b, h, row.i, packs ? 0 : block_keys.begin}}, sums[r], slot[r]);
      }
  }
  const float unscaled[2] = {1, 1};
  store_rows<T, D>(d_q, at.q, p.d_k, dq, rows, query_end, unscaled);
}

}  // namespace attn::cuda_backend::fused_attention_tensor_cores
