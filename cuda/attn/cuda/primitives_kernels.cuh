// The kernels of the GPU's device primitives (primitives.cuh launches them): device code only,
// so that the CPU emulator (emulator.hpp) runs them too.
//
// Where the CPU's result is defined by an order of operations (the embedding gradient's sums,
// Adam's update), the kernels keep that order and round every product and sum on its own
// (__fmul_rn, __fadd_rn: no fused multiply-add), so that a GPU step gives the CPU's numbers bit
// for bit there. Reductions over a row (the loss) use a tree order and agree to rounding.
// 16-bit T (bfloat16, float16) is widened as it is read and computed in C = accumulate_t<T>
// (float), each output rounded once; for float and double C is T and nothing changes.
#pragma once

#include <attn/core.hpp>

#include "elementwise_kernel.cuh"
#include "elementwise_vectors.cuh"

#include <cstddef>
#include <cstdint>
#include <limits>

namespace attn::cuda_backend::primitive_kernels {

/// a·b and a + b, each rounded once, as the host computes them.
__device__ inline float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ inline double mul_rn(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ inline float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ inline double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ inline float sub_rn(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ inline double sub_rn(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ inline float div_rn(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ inline double div_rn(double a, double b) {
  return __ddiv_rn(a, b);
}
__device__ inline float sqrt_rn(float a) {
  return __fsqrt_rn(a);
}
__device__ inline double sqrt_rn(double a) {
  return __dsqrt_rn(a);
}
__device__ inline float exp_of(float a) {
  return ::expf(a);
}
__device__ inline double exp_of(double a) {
  return ::exp(a);
}
__device__ inline float log_of(float a) {
  return ::logf(a);
}
__device__ inline double log_of(double a) {
  return ::log(a);
}

inline constexpr int block = 256;

/// Combines `value` over the block with Op; every thread gets the result. The order of the
/// combination is fixed (warp shuffles, then warp 0 over the warps' results): deterministic.
template <class T, class Op>
__device__ T block_reduce(T value, Op op, T identity, T* shared) {
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < static_cast<int>(blockDim.x / 32) ? shared[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
    if (lane == 0) shared[0] = value;
  }
  __syncthreads();
  const T result = shared[0];
  __syncthreads();  // shared may be reused by the caller's next reduction
  return result;
}

struct plus {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct maximum {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

/// Records the smallest offending position (or row) in *bad; starts at the largest index.
__device__ inline void report(unsigned long long* bad, index_t position) {
  atomicMin(bad, static_cast<unsigned long long>(position));
}

template <class T, class Id, class C = accumulate_t<T>>
__global__ void gather_rows(T* out, const T* table, index_t rows, index_t width, const Id* ids, index_t count, C scale,
                            unsigned long long* bad) {
  for (index_t i = blockIdx.x; i < count; i += gridDim.x) {
    const Id id = ids[i];
    if (id < 0 || id >= rows) {
      if (threadIdx.x == 0) report(bad, i);
      continue;
    }
    const T* from = table + static_cast<index_t>(id) * width;
    T* to = out + i * width;
    for (index_t c = threadIdx.x; c < width; c += blockDim.x) to[c] = T(mul_rn(C(from[c]), scale));
  }
}

/// Columns a thread of scatter_add_sorted sums at once, in registers: 8 × 256 threads = 2 048.
inline constexpr int scatter_columns_a_thread = 8;
/// Rows of a run whose loads scatter_add_sorted has in flight at once. A row at a time, the
/// embedding gradient of an 8 000-token batch took 1.9 ms on an H100 (2026-11-28, a synthetic
/// corpus of 128 tokens: runs of hundreds of positions, each row one load latency).
inline constexpr int scatter_rows_in_flight = 8;

/// One block per run of equal ids in `sorted_ids` (sorted stably, so a run lists its positions
/// in order): table[id, c] += rows_in[position, c] · scale, position after position, as the CPU.
/// The run's positions are staged in shared memory a block's width at a time, and each thread
/// keeps up to 8 columns' sums in registers: the loads of 8 rows are issued together, before
/// their sums, and only the additions keep their order. (A frequent token's run, the end of every
/// sentence, is thousands of positions.) blockDim.x is at most `block`.
template <class T, class Id, class C = accumulate_t<T>>
__global__ void __launch_bounds__(block)
    scatter_add_sorted(T* table, index_t width, const T* rows_in, const Id* sorted_ids, const index_t* positions,
                       index_t count, C scale) {
  __shared__ index_t staged[block];
  __shared__ bool same_id[block];
  const index_t window = blockDim.x;
  const index_t columns_at_once = window * scatter_columns_a_thread;
  for (index_t start = blockIdx.x; start < count; start += gridDim.x) {
    if (start > 0 && sorted_ids[start - 1] == sorted_ids[start]) continue;  // not the first of its run
    const Id id = sorted_ids[start];
    // The run's end: ids are sorted, so a window's flags are trues, then falses.
    index_t end = start;
    for (;;) {
      __syncthreads();  // the previous window's flags have been read
      const index_t j = end + threadIdx.x;
      same_id[threadIdx.x] = j < count && sorted_ids[j] == id;
      __syncthreads();
      if (same_id[window - 1]) {
        end += window;
        continue;
      }
      index_t low = 0, high = window - 1;  // the first false flag, in [low, high]
      while (low < high) {
        const index_t middle = (low + high) / 2;
        if (same_id[middle]) low = middle + 1;
        else high = middle;
      }
      end += low;
      break;
    }
    T* to = table + static_cast<index_t>(id) * width;
    for (index_t first_column = 0; first_column < width; first_column += columns_at_once) {
      const index_t column = first_column + threadIdx.x;  // the thread's columns: column + q · window
      C sum[scatter_columns_a_thread];
#pragma unroll
      for (int q = 0; q < scatter_columns_a_thread; ++q)
        sum[q] = column + q * window < width ? C(to[column + q * window]) : C(0);
      for (index_t at = start; at < end; at += window) {
        __syncthreads();  // the previous window's positions have been read
        if (at + threadIdx.x < end) staged[threadIdx.x] = positions[at + threadIdx.x];
        __syncthreads();
        const index_t rows = end - at < window ? end - at : window;
        index_t k = 0;
        // A group of rows' loads issued before the group's first addition: a long run's time
        // is then its rows' count over the group's size in load latencies, not one each.
        for (; k + scatter_rows_in_flight <= rows; k += scatter_rows_in_flight) {
          C loaded[scatter_rows_in_flight][scatter_columns_a_thread];
#pragma unroll
          for (int r = 0; r < scatter_rows_in_flight; ++r) {
            const T* from = rows_in + staged[k + r] * width + column;
#pragma unroll
            for (int q = 0; q < scatter_columns_a_thread; ++q)
              loaded[r][q] = column + q * window < width ? C(from[q * window]) : C(0);
          }
#pragma unroll
          for (int r = 0; r < scatter_rows_in_flight; ++r)
#pragma unroll
            for (int q = 0; q < scatter_columns_a_thread; ++q)
              if (column + q * window < width) sum[q] = add_rn(sum[q], mul_rn(loaded[r][q], scale));
        }
        for (; k < rows; ++k) {
          const T* from = rows_in + staged[k] * width + column;
#pragma unroll
          for (int q = 0; q < scatter_columns_a_thread; ++q)
            if (column + q * window < width) sum[q] = add_rn(sum[q], mul_rn(C(from[q * window]), scale));
        }
      }
#pragma unroll
      for (int q = 0; q < scatter_columns_a_thread; ++q)
        if (column + q * window < width) to[column + q * window] = T(sum[q]);
    }
  }
}

template <class I>
__global__ void iota(I* out, I count) {
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    out[i] = i;
}

template <class T>
__global__ void select_rows(T* out, const T* in, index_t width, const index_t* keep, index_t count) {
  for (index_t i = blockIdx.x; i < count; i += gridDim.x) {
    const T* from = in + keep[i] * width;
    for (index_t c = threadIdx.x; c < width; c += blockDim.x) out[i * width + c] = from[c];
  }
}

template <class T>
__global__ void copy_blocks_from(T* to, index_t to_stride, const T* from, index_t from_stride, index_t block,
                                 const index_t* sources, index_t count) {
  for (index_t i = blockIdx.x; i < count; i += gridDim.x) {
    const T* source = from + sources[i] * from_stride;
    for (index_t c = threadIdx.x; c < block; c += blockDim.x) to[i * to_stride + c] = source[c];
  }
}

template <class T, class Id>
__global__ void attention_mask(T* bias, const Id* key_ids, index_t sentences, index_t queries, index_t keys, Id pad,
                               bool causal, T masked) {
  const index_t n = sentences * queries * keys;
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const index_t k = i % keys, q = (i / keys) % queries, b = i / (keys * queries);
    bias[i] = (key_ids[b * keys + k] == pad || (causal && k > q)) ? masked : T{0};
  }
}

/// One block a row: the row's maximum, then Σ exp(x − max), then the softmax written; the row's
/// −log p(target) and smoothed loss go to row_nll and row_smoothed.
template <class T, class Id, class C = accumulate_t<T>>
__global__ void cross_entropy_rows(const T* logits, const Id* targets, index_t rows, index_t classes, double smoothing,
                                   Id pad, C* probabilities, C* weight, double* row_nll, double* row_smoothed,
                                   unsigned long long* bad) {
  __shared__ C shared_t[32];
  __shared__ double shared_d[32];
  for (index_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * classes;
    C* p = probabilities + r * classes;
    C local_max = -std::numeric_limits<C>::infinity();
    double local_total = 0;
    for (index_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const C value = C(x[c]);
      local_max = value > local_max ? value : local_max;
      local_total += double(value);
    }
    const C row_max = block_reduce(local_max, maximum{}, -std::numeric_limits<C>::infinity(), shared_t);
    const double row_total = block_reduce(local_total, plus{}, 0.0, shared_d);
    C local_sum = 0;
    for (index_t c = threadIdx.x; c < classes; c += blockDim.x) local_sum += exp_of(C(x[c]) - row_max);
    const C sum = block_reduce(local_sum, plus{}, C{0}, shared_t);
    const C inverse = C{1} / sum;
    // Each exponential computed again rather than stored and read back: the probabilities are
    // written once, and the row's logits are read a third time, 2 bytes an element in 16 bits
    // where a float stored, read and stored again was 8.
    strided_in_rounds<elementwise_unroll>(
        static_cast<index_t>(threadIdx.x), classes, static_cast<index_t>(blockDim.x),
        [&](index_t c) { return exp_of(C(x[c]) - row_max); }, [&](index_t c, C e) { p[c] = e * inverse; });
    if (threadIdx.x == 0) {
      const Id target = targets[r];
      if (target == pad) {
        weight[r] = C{0};
        row_nll[r] = row_smoothed[r] = 0;
      } else if (target < 0 || target >= classes) {
        weight[r] = C{0};
        row_nll[r] = row_smoothed[r] = 0;
        report(bad, r);
      } else {
        weight[r] = C{1};
        const double log_sum = ::log(double(sum)) + double(row_max);
        const double log_p_target = double(x[target]) - log_sum;
        const double mean_log_p = row_total / double(classes) - log_sum;
        row_nll[r] = -log_p_target;
        row_smoothed[r] = -((1.0 - smoothing) * log_p_target + smoothing * mean_log_p);
      }
    }
  }
}

/// One block: totals[0] = Σ row_nll, totals[1] = Σ row_smoothed, totals[2] = real tokens.
template <class T>
__global__ void cross_entropy_totals(const double* row_nll, const double* row_smoothed, const T* weight, index_t rows,
                                     double* totals) {
  __shared__ double shared[32];
  double nll = 0, smoothed = 0, tokens = 0;
  for (index_t r = threadIdx.x; r < rows; r += blockDim.x) {
    nll += row_nll[r];
    smoothed += row_smoothed[r];
    tokens += double(weight[r]);
  }
  nll = block_reduce(nll, plus{}, 0.0, shared);
  smoothed = block_reduce(smoothed, plus{}, 0.0, shared);
  tokens = block_reduce(tokens, plus{}, 0.0, shared);
  if (threadIdx.x == 0) {
    totals[0] = nll;
    totals[1] = smoothed;
    totals[2] = tokens;
  }
}

/// gradient (T) from the probabilities (C), which may be the same memory when T is C: each
/// element is read before it is written, by the same thread. A block a row, so that a row's
/// weight and target are read once and no element's row and class are found by dividing.
template <class T, class Id, class C = accumulate_t<T>>
__global__ void cross_entropy_backward(T* gradient, const C* probabilities, const Id* targets, const C* weight,
                                       index_t rows, index_t classes, C uniform_share, C target_share, C scale) {
  const index_t first = threadIdx.x, step = blockDim.x;
  for (index_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T* g = gradient + r * classes;
    const C row_scale = weight[r] * scale;
    if (row_scale == C{0}) {  // padding: no gradient, whatever the probabilities hold
      for (index_t c = first; c < classes; c += step) g[c] = T{0};
      continue;
    }
    const C* p = probabilities + r * classes;
    const index_t target = static_cast<index_t>(targets[r]);
    strided_in_rounds<elementwise_unroll>(
        first, classes, step, [&](index_t c) { return p[c]; },
        [&](index_t c, C probability) {
          C g_c = (probability - uniform_share) * row_scale;
          if (c == target) g_c -= target_share * row_scale;
          g[c] = T(g_c);
        });
  }
}

/// Combines `value` over the warp with Op by a butterfly: every lane gets the same result
/// (each step combines the same two partials, in either order, and Op commutes).
template <class T, class Op>
__device__ T warp_reduce(T value, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

inline constexpr int warps_a_block = block / 32;

/// The rows a warp works on: warp w of the grid takes rows w, w + warps, …
struct warp_rows {
  index_t first, step;
  __device__ warp_rows()
      : first(static_cast<index_t>(blockIdx.x) * warps_a_block + threadIdx.x / 32),
        step(static_cast<index_t>(gridDim.x) * warps_a_block) {}
};

/// A warp a row: the row's maximum, then Σ exp(x − max), then the softmax written, each pass
/// reading x · scale + bias again (from the cache) rather than keeping it.
template <class T, class C = accumulate_t<T>>
__global__ void softmax_rows(T* out, const T* in, index_t rows, index_t width, C scale, repeated_rows<T> bias) {
  const int lane = threadIdx.x % 32;
  const warp_rows mine;
  for (index_t r = mine.first; r < rows; r += mine.step) {
    const T* x = in + r * width;
    const T* b = bias.data ? bias.data + bias.row(r) * width : nullptr;
    const auto value = [&](index_t c) { return b ? C(x[c]) * scale + C(b[c]) : C(x[c]) * scale; };
    C row_max = -std::numeric_limits<C>::infinity();
    for (index_t c = lane; c < width; c += 32) row_max = maximum{}(row_max, value(c));
    row_max = warp_reduce(row_max, maximum{});
    C total = 0;
    for (index_t c = lane; c < width; c += 32) total += exp_of(value(c) - row_max);
    const C inverse = C{1} / warp_reduce(total, plus{});
    T* y = out + r * width;
    for (index_t c = lane; c < width; c += 32) y[c] = T(exp_of(value(c) - row_max) * inverse);
  }
}

/// A warp a row: out = x − max − log Σ exp(x − max), in C.
template <class T, class C = accumulate_t<T>>
__global__ void log_softmax_rows(C* out, const T* in, index_t rows, index_t width) {
  const int lane = threadIdx.x % 32;
  const warp_rows mine;
  for (index_t r = mine.first; r < rows; r += mine.step) {
    const T* x = in + r * width;
    C row_max = -std::numeric_limits<C>::infinity();
    for (index_t c = lane; c < width; c += 32) row_max = maximum{}(row_max, C(x[c]));
    row_max = warp_reduce(row_max, maximum{});
    C total = 0;
    for (index_t c = lane; c < width; c += 32) total += exp_of(C(x[c]) - row_max);
    const C log_total = log_of(warp_reduce(total, plus{}));
    C* y = out + r * width;
    for (index_t c = lane; c < width; c += 32) y[c] = (C(x[c]) - row_max) - log_total;
  }
}

/// A warp a row: dx (+)= scale · y ⊙ (dy − Σ dy ⊙ y).
template <class T, class C = accumulate_t<T>>
__global__ void softmax_rows_backward(T* dx, bool add, const T* y, const T* dy, index_t rows, index_t width, C scale) {
  const int lane = threadIdx.x % 32;
  const warp_rows mine;
  for (index_t r = mine.first; r < rows; r += mine.step) {
    const T* y_row = y + r * width;
    const T* dy_row = dy + r * width;
    C dot = 0;
    for (index_t c = lane; c < width; c += 32) dot += C(dy_row[c]) * C(y_row[c]);
    dot = warp_reduce(dot, plus{});
    T* dx_row = dx + r * width;
    for (index_t c = lane; c < width; c += 32) {
      const C g = (C(dy_row[c]) - dot) * C(y_row[c]) * scale;
      dx_row[c] = T(add ? C(dx_row[c]) + g : g);
    }
  }
}

/// A warp a row: the mean, the variance of the centred row (a second pass, for accuracy), the
/// row normalised, scaled and shifted.
template <class T, class C = accumulate_t<T>>
__global__ void layer_norm_rows(T* out, C* row_mean, C* row_rstd, const T* in, const T* gain, const T* bias,
                                index_t rows, index_t width, C epsilon) {
  const int lane = threadIdx.x % 32;
  const warp_rows mine;
  for (index_t r = mine.first; r < rows; r += mine.step) {
    const T* x = in + r * width;
    C total = 0;
    for (index_t c = lane; c < width; c += 32) total += C(x[c]);
    const C mean = warp_reduce(total, plus{}) / C(width);
    C squares = 0;
    for (index_t c = lane; c < width; c += 32) squares += (C(x[c]) - mean) * (C(x[c]) - mean);
    const C rstd = C{1} / sqrt_rn(warp_reduce(squares, plus{}) / C(width) + epsilon);
    T* y = out + r * width;
    for (index_t c = lane; c < width; c += 32) y[c] = T((C(x[c]) - mean) * rstd * C(gain[c]) + C(bias[c]));
    if (lane == 0) {
      row_mean[r] = mean;
      row_rstd[r] = rstd;
    }
  }
}

/// Sums each of N numbers (N a power of 2 up to 32) over the warp, and lane l gets the total of
/// number l / (32 / N): halves of the numbers swapped between lane pairs, then a butterfly, in
/// N − 1 + log2(32 / N) shuffles rather than 5N (8 numbers: 9 rather than 40).
template <int N, class C>
__device__ C warp_sum_each(C (&numbers)[N]) {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "a power of 2 up to a warp");
  const int lane = int(threadIdx.x) % 32;
#pragma unroll
  for (int count = N, offset = 16; count > 1; count /= 2, offset /= 2) {
    const bool upper = (lane & offset) != 0;  // keeps the upper half, its pair the lower
#pragma unroll
    for (int i = 0; i < count / 2; ++i) {
      const C kept = upper ? numbers[i + count / 2] : numbers[i];
      const C sent = upper ? numbers[i] : numbers[i + count / 2];
      numbers[i] = kept + __shfl_xor_sync(0xffffffffu, sent, offset);
    }
  }
  C total = numbers[0];
#pragma unroll
  for (int offset = 16 / N; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
  return total;
}

/// Rows whose per-row sums a block holds in shared memory at a time (LayerNorm's backward pass).
inline constexpr int layer_norm_rows_at_once = 64;
/// Rows whose inputs a thread of LayerNorm's backward pass loads before it computes their dx, a
/// column at a time; in runs of 16 bytes, half as many (four made ptxas take 132 registers in
/// bfloat16 and with them one block a multiprocessor, two take 95).
inline constexpr int layer_norm_rows_in_flight = 4;

/// Whether this block is the last of `arrivals` blocks to count on `counter`. What the block
/// wrote before is visible to the last one (the fence before the count), and the last one sees
/// what the others wrote (the fence after it). Every thread of the block calls it.
__device__ inline bool last_to_arrive(unsigned* counter, unsigned arrivals) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1u) == arrivals - 1;
    if (last) __threadfence();
  }
  __syncthreads();
  return last;
}

/// layer_norm_rows_backward's launch: at most 512 blocks of 16 rows or more (from 8 192 rows, the
/// last few may have none: rows_a_block is rounded up), whatever the GPU, so that the gain's and
/// bias's sums are added in the same order on every device; with those sums, scratch for the
/// blocks' partials [blocks, 2, width], then each group of 16 blocks' sums [groups, 2, width],
/// then a counter of finished blocks for each group and one of finished groups (`counters`,
/// `counter_bytes` of them zeroed before the launch).
template <class C>
struct layer_norm_backward_launch {
  static constexpr index_t blocks_a_group = 16;
  index_t blocks, rows_a_block, groups;
  std::size_t scratch_bytes;  // 0 without sums
  layer_norm_backward_launch(index_t rows, index_t width, bool sums)
      : blocks(rows < 512 * 16 ? (rows + 15) / 16 : 512),
        rows_a_block((rows + blocks - 1) / blocks),
        groups((blocks + blocks_a_group - 1) / blocks_a_group),
        scratch_bytes(sums ? sizeof(C) * std::size_t((blocks + groups) * 2 * width) + counter_bytes() : 0) {}
  C* partial(void* scratch) const { return static_cast<C*>(scratch); }
  C* group_partial(void* scratch, index_t width) const {
    return scratch_bytes ? partial(scratch) + blocks * 2 * width : nullptr;
  }
  unsigned* counters(void* scratch, index_t width) const {
    return scratch_bytes ? reinterpret_cast<unsigned*>(group_partial(scratch, width) + groups * 2 * width) : nullptr;
  }
  std::size_t counter_bytes() const { return sizeof(unsigned) * std::size_t(groups + 1); }
};

/// Threads that take a row together in LayerNorm's backward pass: a warp, or a power of 2 more
/// up to the block, enough for the row's `runs` (layer_norm_backward_run), so that a row of 512
/// bfloat16 numbers (64 runs of 8) keeps two warps busy and the block's other six take other rows.
__host__ __device__ constexpr int layer_norm_row_threads(index_t runs) {
  int threads = 32;
  while (threads < block && threads < runs) threads *= 2;
  return threads;
}

/// The run of columns LayerNorm's backward reads and writes at a time: 16 bytes of T
/// (vector_width) where the width is a multiple of it and every array starts on 16 bytes, so
/// that each row does too; 1 elsewhere. A warp's access then covers 512 bytes, not 64. A thread
/// a column with 2-byte loads took 77 µs at [8 000, 1 024] in bf16 on an H100, five times its
/// bytes' time, and with 4 rows in flight still 46.6 µs at [8 000, 512] on an H200 (2026-11-28,
/// docs/benchmarks.md, "the fifth run").
template <class T>
int layer_norm_backward_run(index_t width, const T* dx, const T* dy, const T* in, const T* gain) {
  constexpr int V = vector_width<T>;
  return width % V == 0 && on_16_bytes(dx) && on_16_bytes(dy) && on_16_bytes(in) && on_16_bytes(gain) ? V : 1;
}

/// LayerNorm's backward pass in one launch, its rows read in runs of V columns. Each block takes
/// a run of rows, 64 at a time. Its threads form teams of layer_norm_row_threads, a team a row:
/// first each row's mean(g) and mean(g ⊙ x̂) (each warp's share of a row, then the team's warps
/// added in order), then, run after run of columns, dx and the team's sums of the gain and bias
/// gradients over its rows, which the first team adds in team order into the block's partial
/// sums, written to `partial` [blocks, 2, width]. The last block of each group of 16 to finish
/// adds the group's partials in block order, and the last group to finish adds the groups' sums
/// in group order: no atomics on the sums, so the result does not depend on which block ran
/// first. (One last block adding all 512 blocks' partials, as until 2026-11-27, read 2 048 of
/// them a thread at width 512 while the rest of the GPU waited; now 64, then 128.)
template <class T, int V, class C = accumulate_t<T>>
__global__ void layer_norm_rows_backward(T* dx, bool add, T* gain_grad, T* bias_grad, const T* dy, const T* in,
                                         const C* row_mean, const C* row_rstd, const T* gain, index_t rows,
                                         index_t width, index_t rows_a_block, C* partial, C* group_partial,
                                         unsigned* finished) {
  constexpr int F = V > 1 ? layer_norm_rows_in_flight / 2 : layer_norm_rows_in_flight;
  __shared__ C row_parts[2][layer_norm_rows_at_once][warps_a_block];  // g's and g ⊙ x̂'s sums a warp
  __shared__ C column_parts[2][V * block];  // the gain's and bias's sums a thread, [e][thread]: no bank conflicts
  const index_t runs = (width + V - 1) / V;  // width / V where V > 1 (layer_norm_backward_run)
  const int team_threads = layer_norm_row_threads(runs), teams = block / team_threads;
  const int team = int(threadIdx.x) / team_threads, member = int(threadIdx.x) % team_threads;
  const int lane = int(threadIdx.x) % 32;
  // Rounds of a team's runs: the same for every thread, for the barriers inside.
  const index_t run_rounds = (runs + team_threads - 1) / team_threads;
  const bool sums = gain_grad || bias_grad;
  const index_t first = static_cast<index_t>(blockIdx.x) * rows_a_block;
  const index_t end = first + rows_a_block < rows ? first + rows_a_block : rows;
  // This block's partial sums: `partial` is null where no sum is asked for, so no pointer from it.
  C* const gain_partial = sums ? partial + static_cast<index_t>(blockIdx.x) * 2 * width : nullptr;
  C* const bias_partial = sums ? gain_partial + width : nullptr;
  if (sums)
    for (index_t c = threadIdx.x; c < width; c += blockDim.x) gain_partial[c] = bias_partial[c] = C{0};
  // Run j of x and dy of the team's rows r0, r0 + teams, … before `stop`, F of them.
  const auto load_runs = [&](index_t r0, index_t stop, index_t j, T (&x_run)[F][V], T (&d_run)[F][V]) {
#pragma unroll
    for (int u = 0; u < F; ++u) {
      const index_t r = r0 + u * teams;
      if (r < stop) {
        copy_run<V>(x_run[u], in + r * width + j * V);
        copy_run<V>(d_run[u], dy + r * width + j * V);
      }
    }
  };
  for (index_t at = first; at < end; at += layer_norm_rows_at_once) {
    const index_t stop = at + layer_norm_rows_at_once < end ? at + layer_norm_rows_at_once : end;
    // A team's rows of this window: r0, r0 + teams, … F of them at a time, their loads first
    // (dx's stores may alias the inputs for all the compiler knows, so a row at a time, each
    // row waited a load latency).
    const index_t team_first = at + team, team_step = index_t(teams) * F;
    if (dx) {
      for (index_t r0 = team_first; r0 < stop; r0 += team_step) {
        C g_total[F] = {}, gx_total[F] = {}, mean_of[F] = {}, rstd_of[F] = {};
#pragma unroll
        for (int u = 0; u < F; ++u)
          if (r0 + u * teams < stop) mean_of[u] = row_mean[r0 + u * teams], rstd_of[u] = row_rstd[r0 + u * teams];
        for (index_t j = member; j < runs; j += team_threads) {
          alignas(16) T gain_run[V], x_run[F][V], d_run[F][V];
          copy_run<V>(gain_run, gain + j * V);
          load_runs(r0, stop, j, x_run, d_run);
#pragma unroll
          for (int u = 0; u < F; ++u)
            if (r0 + u * teams < stop)
#pragma unroll
              for (int e = 0; e < V; ++e) {
                const C g = mul_rn(C(d_run[u][e]), C(gain_run[e]));  // rounded as in the dx loop below
                g_total[u] += g;
                gx_total[u] += g * ((C(x_run[u][e]) - mean_of[u]) * rstd_of[u]);
              }
        }
        C totals[2 * F];  // the warp's sums of the F rows: g's of row u at 2u, g ⊙ x̂'s at 2u + 1
#pragma unroll
        for (int u = 0; u < F; ++u) totals[2 * u] = g_total[u], totals[2 * u + 1] = gx_total[u];
        const C total = warp_sum_each(totals);  // number lane / (32 / 2F) of them
        const int number = lane / (32 / (2 * F));
        const index_t r = r0 + number / 2 * teams;
        if (lane % (32 / (2 * F)) == 0 && r < stop) row_parts[number % 2][r - at][member / 32] = total;
      }
    }
    __syncthreads();  // the rows' sums are in; so are the zeroed partials, which other threads add to
    for (index_t round = 0; round < run_rounds; ++round) {
      const index_t j = member + round * team_threads;  // the thread's run
      C gain_sum[V] = {}, bias_sum[V] = {};
      if (j < runs) {
        alignas(16) T gain_run[V] = {};
        if (dx) copy_run<V>(gain_run, gain + j * V);
        for (index_t r0 = team_first; r0 < stop; r0 += team_step) {
          alignas(16) T x_run[F][V] = {}, d_run[F][V] = {}, dx_run[F][V] = {};
          C mean_of[F] = {}, rstd_of[F] = {}, g_mean[F] = {}, gx_mean[F] = {};
          load_runs(r0, stop, j, x_run, d_run);
#pragma unroll
          for (int u = 0; u < F; ++u) {
            const index_t r = r0 + u * teams;
            if (r < stop) {
              if (dx && add) copy_run<V>(dx_run[u], dx + r * width + j * V);
              mean_of[u] = row_mean[r];
              rstd_of[u] = row_rstd[r];
              if (dx) {  // mean(g) and mean(g ⊙ x̂): the team's warps' sums in warp order
                for (int w = 0; w < team_threads / 32; ++w)
                  g_mean[u] += row_parts[0][r - at][w], gx_mean[u] += row_parts[1][r - at][w];
                g_mean[u] /= C(width);
                gx_mean[u] /= C(width);
              }
            }
          }
#pragma unroll
          for (int u = 0; u < F; ++u) {
            const index_t r = r0 + u * teams;
            if (r >= stop) break;
            alignas(16) T out_run[V];
#pragma unroll
            for (int e = 0; e < V; ++e) {
              const C rstd = rstd_of[u];
              const C x_hat = (C(x_run[u][e]) - mean_of[u]) * rstd;
              const C d = C(d_run[u][e]);
              gain_sum[e] += d * x_hat;
              bias_sum[e] += d;
              if (dx) {
                // d·gain rounded on its own (no fused multiply-add): at width 1, g − mean(g) is then 0.
                const C g = (mul_rn(d, C(gain_run[e])) - g_mean[u] - x_hat * gx_mean[u]) * rstd;
                out_run[e] = T(add ? C(dx_run[u][e]) + g : g);
              }
            }
            if (dx) copy_run<V>(dx + r * width + j * V, out_run);
          }
        }
      }
      if (!sums) continue;
      if (teams == 1) {
        if (j < runs)
#pragma unroll
          for (int e = 0; e < V; ++e) gain_partial[j * V + e] += gain_sum[e], bias_partial[j * V + e] += bias_sum[e];
        continue;
      }
#pragma unroll
      for (int e = 0; e < V; ++e) {
        column_parts[0][e * block + threadIdx.x] = gain_sum[e];
        column_parts[1][e * block + threadIdx.x] = bias_sum[e];
      }
      __syncthreads();
      if (team == 0 && j < runs)
#pragma unroll
        for (int e = 0; e < V; ++e) {
          C gain_total = 0, bias_total = 0;
          for (int other = 0; other < teams; ++other) {
            gain_total += column_parts[0][e * block + other * team_threads + member];
            bias_total += column_parts[1][e * block + other * team_threads + member];
          }
          gain_partial[j * V + e] += gain_total;
          bias_partial[j * V + e] += bias_total;
        }
      if (round + 1 < run_rounds) __syncthreads();  // before the next round's sums take column_parts
    }
    if (at + layer_norm_rows_at_once < end) __syncthreads();  // before the next window's row and column sums
  }
  if (!sums) return;
  constexpr index_t blocks_a_group = layer_norm_backward_launch<C>::blocks_a_group;
  const index_t group = blockIdx.x / blocks_a_group, groups = (gridDim.x + blocks_a_group - 1) / blocks_a_group;
  const index_t first_block = group * blocks_a_group;
  const index_t end_block = first_block + blocks_a_group < gridDim.x ? first_block + blocks_a_group : gridDim.x;
  // The gain's and bias's sums of `sums` [first, end) (each [2, width]) at column c, in order.
  const auto add_in_order = [&](const C* sums, index_t first, index_t end, index_t c, C& gain_total, C& bias_total) {
    gain_total = 0;
    bias_total = 0;
    for (index_t b = first; b < end; ++b) {
      gain_total += __ldcg(sums + b * 2 * width + c);  // from L2: other blocks wrote them
      bias_total += __ldcg(sums + (b * 2 + 1) * width + c);
    }
  };
  if (!last_to_arrive(finished + group, unsigned(end_block - first_block))) return;
  for (index_t c = threadIdx.x; c < width; c += blockDim.x)
    add_in_order(partial, first_block, end_block, c, group_partial[group * 2 * width + c],
                 group_partial[(group * 2 + 1) * width + c]);
  if (!last_to_arrive(finished + groups, unsigned(groups))) return;
  for (index_t c = threadIdx.x; c < width; c += blockDim.x) {
    C gain_total, bias_total;
    add_in_order(group_partial, 0, groups, c, gain_total, bias_total);
    if (gain_grad) gain_grad[c] = T(C(gain_grad[c]) + gain_total);
    if (bias_grad) bias_grad[c] = T(C(bias_grad[c]) + bias_total);
  }
}

/// layer_norm_rows_backward for T with its run (layer_norm_backward_run).
template <class T, class C = accumulate_t<T>>
auto layer_norm_backward_kernel(int run) {
  return run == 1 ? &layer_norm_rows_backward<T, 1, C> : &layer_norm_rows_backward<T, vector_width<T>, C>;
}

/// A piece of one array in a multi-tensor launch: block b works on chunks[b].
struct chunk {
  int array;
  index_t begin, end;
};
inline constexpr index_t chunk_elements = index_t{1} << 16;

template <class T>
__global__ void adam_step(const adam_tensor<T>* tensors, const chunk* chunks, T b1, T b2, T rest1, T rest2, T step_size,
                          T root_correction2, T epsilon) {
  const chunk piece = chunks[blockIdx.x];
  const adam_tensor<T> t = tensors[piece.array];
  for (index_t j = piece.begin + threadIdx.x; j < piece.end; j += blockDim.x) {
    const T g = t.grad[j];
    const T m = add_rn(mul_rn(b1, t.first_moment[j]), mul_rn(rest1, g));
    const T v = add_rn(mul_rn(b2, t.second_moment[j]), mul_rn(mul_rn(rest2, g), g));
    t.first_moment[j] = m;
    t.second_moment[j] = v;
    t.value[j] =
        sub_rn(t.value[j], div_rn(mul_rn(step_size, m), add_rn(mul_rn(sqrt_rn(v), root_correction2), epsilon)));
  }
}

template <class T>
__global__ void sum_of_squares(const flat_array<const T>* arrays, const chunk* chunks, double* partial) {
  __shared__ double shared[32];
  const chunk piece = chunks[blockIdx.x];
  const T* data = arrays[piece.array].data;
  double local = 0;
  for (index_t j = piece.begin + threadIdx.x; j < piece.end; j += blockDim.x)
    local += double(data[j]) * double(data[j]);
  local = block_reduce(local, plus{}, 0.0, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = local;
}

template <class T>
__global__ void sum_partials(const T* partial, index_t count, T* total) {
  __shared__ T shared[32];
  T local = 0;
  for (index_t j = threadIdx.x; j < count; j += blockDim.x) local += partial[j];
  local = block_reduce(local, plus{}, T{0}, shared);
  if (threadIdx.x == 0) *total = local;
}

template <class T>
__global__ void scale(const flat_array<T>* arrays, const chunk* chunks, double factor) {
  const chunk piece = chunks[blockIdx.x];
  T* data = arrays[piece.array].data;
  for (index_t j = piece.begin + threadIdx.x; j < piece.end; j += blockDim.x) data[j] = T(double(data[j]) * factor);
}

template <class T>
__global__ void fill_arrays(const flat_array<T>* arrays, const chunk* chunks, T value) {
  const chunk piece = chunks[blockIdx.x];
  T* data = arrays[piece.array].data;
  for (index_t j = piece.begin + threadIdx.x; j < piece.end; j += blockDim.x) data[j] = value;
}

template <class T>
__global__ void fill(T* data, index_t count, T value) {
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    data[i] = value;
}

}  // namespace attn::cuda_backend::primitive_kernels
