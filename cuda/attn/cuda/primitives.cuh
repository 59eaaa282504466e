// The GPU's device primitives (core/primitives.hpp), each one launch or a few, on attn's stream;
// their kernels are in primitives_kernels.cuh (which says what they keep of the CPU's order).
#pragma once

#include <attn/core.hpp>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "elementwise.cuh"
#include "memory.cuh"
#include "primitives_kernels.cuh"

namespace attn::cuda_backend::detail {

/// Host values copied to fresh stream-ordered device memory (freed after the work that reads them).
template <class T>
scratch_ptr upload(std::span<const T> host) {
  scratch_ptr p = allocate_scratch(host.size_bytes());
  if (!host.empty())
    ATTN_CUDA_CHECK(cudaMemcpyAsync(p.get(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream()));
  return p;
}

/// What a multi-tensor launch reads: the arrays' descriptions and the pieces of every array
/// (a block each), both copied to the device.
template <class Array>
class multi_tensor {
 public:
  explicit multi_tensor(std::span<const Array> arrays) {
    std::vector<primitive_kernels::chunk> pieces;
    for (std::size_t a = 0; a < arrays.size(); ++a)
      for (index_t begin = 0; begin < arrays[a].size; begin += primitive_kernels::chunk_elements)
        pieces.push_back({int(a), begin, std::min(arrays[a].size, begin + primitive_kernels::chunk_elements)});
    blocks_ = unsigned(pieces.size());
    if (blocks_ == 0) return;
    arrays_ = upload(arrays);
    chunks_ = upload(std::span<const primitive_kernels::chunk>(pieces));
  }
  /// Blocks to launch: 0 when there is nothing to do.
  unsigned blocks() const { return blocks_; }
  /// kernel(arrays, chunks, args...) with a block a chunk of `threads`, where there is a chunk.
  template <class... Params, class... Args>
  void launch(void (*kernel)(const Array*, const primitive_kernels::chunk*, Params...), int threads,
              Args... args) const {
    if (blocks_ == 0) return;
    kernel<<<blocks_, threads, 0, stream()>>>(arrays(), chunks(), args...);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }
  const Array* arrays() const { return static_cast<const Array*>(arrays_.get()); }
  const primitive_kernels::chunk* chunks() const { return static_cast<const primitive_kernels::chunk*>(chunks_.get()); }

 private:
  unsigned blocks_ = 0;
  scratch_ptr arrays_, chunks_;
};

/// A device word that kernels lower to the first bad position they meet; read after a launch.
class bad_position {
 public:
  static constexpr unsigned long long none = std::numeric_limits<unsigned long long>::max();
  bad_position() : word_(allocate_scratch(sizeof(unsigned long long))) {
    ATTN_CUDA_CHECK(cudaMemsetAsync(word_.get(), 0xff, sizeof(unsigned long long), stream()));
  }
  unsigned long long* get() { return static_cast<unsigned long long*>(word_.get()); }
  /// Waits for the stream; none when no kernel reported.
  unsigned long long read() {
    unsigned long long host = none;
    ATTN_CUDA_CHECK(cudaMemcpyAsync(&host, word_.get(), sizeof host, cudaMemcpyDeviceToHost, stream()));
    synchronize();
    return host;
  }

 private:
  scratch_ptr word_;
};

/// CUB's sorts count items in int.
inline int cub_items(index_t count) {
  if (count > index_t{std::numeric_limits<int>::max()})
    throw std::length_error("attn::scatter_add_rows: " + std::to_string(count) + " rows exceed CUB's 32-bit counts");
  return static_cast<int>(count);
}

}  // namespace attn::cuda_backend::detail

namespace attn {

template <>
struct primitives<cuda> {
  /// Checks the ids on the device, and waits for the check: a bad id is an exception here, as
  /// on the CPU, not a wrong embedding later.
  template <class T, class Id>
  static void gather_rows(T* out, const T* table, index_t rows, index_t width, const Id* ids, index_t count,
                          accumulate_t<T> scale) {
    if (count == 0) return;
    cuda_backend::detail::bad_position bad;
    cuda_backend::primitive_kernels::gather_rows<<<grid(count), row_block(width), 0, cuda_backend::stream()>>>(
        out, table, rows, width, ids, count, scale, bad.get());
    ATTN_CUDA_CHECK(cudaGetLastError());
    if (const auto at = bad.read(); at != bad.none) {
      Id id{};
      ATTN_CUDA_CHECK(cudaMemcpy(&id, ids + at, sizeof id, cudaMemcpyDeviceToHost));
      throw extent_error("attn::embedding", "vocab",
                         "has extent " + std::to_string(rows) + ", but token id " + std::to_string(id) +
                             " was given at position " + std::to_string(at));
    }
  }

  /// Sorts (id, position) pairs stably by id, then adds each id's rows in position order.
  template <class T, class Id>
  static void scatter_add_rows(T* table, index_t width, const T* rows_in, const Id* ids, index_t count,
                               accumulate_t<T> scale) {
    if (count == 0) return;
    const int items = cuda_backend::detail::cub_items(count);
    cuda_backend::scratch_ptr positions = cuda_backend::allocate_scratch(sizeof(index_t) * count);
    cuda_backend::scratch_ptr sorted_positions = cuda_backend::allocate_scratch(sizeof(index_t) * count);
    cuda_backend::scratch_ptr sorted_ids = cuda_backend::allocate_scratch(sizeof(Id) * count);
    cuda_backend::primitive_kernels::iota<index_t>
        <<<elements(count), cuda_backend::primitive_kernels::block, 0, cuda_backend::stream()>>>(
            static_cast<index_t*>(positions.get()), count);
    std::size_t temporary_bytes = 0;
    ATTN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        nullptr, temporary_bytes, ids, static_cast<Id*>(sorted_ids.get()), static_cast<const index_t*>(positions.get()),
        static_cast<index_t*>(sorted_positions.get()), items, 0, int(sizeof(Id) * 8), cuda_backend::stream()));
    cuda_backend::scratch_ptr temporary = cuda_backend::allocate_scratch(temporary_bytes);
    ATTN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        temporary.get(), temporary_bytes, ids, static_cast<Id*>(sorted_ids.get()),
        static_cast<const index_t*>(positions.get()), static_cast<index_t*>(sorted_positions.get()), items, 0,
        int(sizeof(Id) * 8), cuda_backend::stream()));
    cuda_backend::primitive_kernels::scatter_add_sorted<<<grid(count), row_block(width), 0, cuda_backend::stream()>>>(
        table, width, rows_in, static_cast<const Id*>(sorted_ids.get()),
        static_cast<const index_t*>(sorted_positions.get()), count, scale);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  template <class T>
  static void select_rows(T* out, const T* in, index_t rows, index_t width, const index_t* keep, index_t count) {
    for (index_t i = 0; i < count; ++i)
      if (keep[i] < 0 || keep[i] >= rows)
        throw extent_error("attn::select_rows", "rows",
                           "has extent " + std::to_string(rows) + ", but row " + std::to_string(keep[i]) + " was kept");
    if (count == 0 || width == 0) return;
    const auto on_device = cuda_backend::detail::upload(std::span<const index_t>(keep, std::size_t(count)));
    cuda_backend::primitive_kernels::select_rows<<<grid(count), row_block(width), 0, cuda_backend::stream()>>>(
        out, in, width, static_cast<const index_t*>(on_device.get()), count);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  template <class T>
  static void copy_blocks(T* to, index_t to_stride, const T* from, index_t from_stride, index_t block, index_t count,
                          const index_t* sources = nullptr) {
    if (block == 0 || count == 0) return;
    if (sources == nullptr) {
      ATTN_CUDA_CHECK(cudaMemcpy2DAsync(to, sizeof(T) * to_stride, from, sizeof(T) * from_stride, sizeof(T) * block,
                                        std::size_t(count), cudaMemcpyDeviceToDevice, cuda_backend::stream()));
      return;
    }
    const auto on_device = cuda_backend::detail::upload(std::span<const index_t>(sources, std::size_t(count)));
    cuda_backend::primitive_kernels::copy_blocks_from<<<grid(count), row_block(block), 0, cuda_backend::stream()>>>(
        to, to_stride, from, from_stride, block, static_cast<const index_t*>(on_device.get()), count);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  template <class T, class Id>
  static void attention_mask(T* bias, const Id* key_ids, index_t sentences, index_t queries, index_t keys, Id pad,
                             bool causal, T masked) {
    const index_t n = sentences * queries * keys;
    if (n == 0) return;
    cuda_backend::primitive_kernels::
        attention_mask<<<elements(n), cuda_backend::primitive_kernels::block, 0, cuda_backend::stream()>>>(
            bias, key_ids, sentences, queries, keys, pad, causal, masked);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  /// One launch over the rows (a block each), one for the totals, one copy back (which waits).
  template <class T, class Id>
  static cross_entropy_totals cross_entropy(const T* logits, const Id* targets, index_t rows, index_t classes,
                                            double smoothing, Id pad, accumulate_t<T>* probabilities,
                                            accumulate_t<T>* weight) {
    if (rows == 0) return {};
    cuda_backend::scratch_ptr per_row = cuda_backend::allocate_scratch(sizeof(double) * (2 * rows + 3));
    double* row_nll = static_cast<double*>(per_row.get());
    double* row_smoothed = row_nll + rows;
    double* totals = row_smoothed + rows;
    cuda_backend::detail::bad_position bad;
    cuda_backend::primitive_kernels::
        cross_entropy_rows<<<grid(rows), cuda_backend::primitive_kernels::block, 0, cuda_backend::stream()>>>(
            logits, targets, rows, classes, smoothing, pad, probabilities, weight, row_nll, row_smoothed, bad.get());
    cuda_backend::primitive_kernels::cross_entropy_totals<<<1, 1024, 0, cuda_backend::stream()>>>(row_nll, row_smoothed,
                                                                                                  weight, rows, totals);
    ATTN_CUDA_CHECK(cudaGetLastError());
    double host[3] = {};
    ATTN_CUDA_CHECK(cudaMemcpyAsync(host, totals, sizeof host, cudaMemcpyDeviceToHost, cuda_backend::stream()));
    if (const auto at = bad.read(); at != bad.none) {
      Id id{};
      ATTN_CUDA_CHECK(cudaMemcpy(&id, targets + at, sizeof id, cudaMemcpyDeviceToHost));
      throw unknown_target(classes, static_cast<long long>(id), static_cast<index_t>(at));
    }
    return {host[0], host[1], static_cast<index_t>(host[2])};
  }

  /// A block a row, one launch.
  template <class T, class Id>
  static void cross_entropy_backward(T* gradient, const accumulate_t<T>* probabilities, const Id* targets,
                                     const accumulate_t<T>* weight, index_t rows, index_t classes, double smoothing,
                                     accumulate_t<T> scale) {
    using C = accumulate_t<T>;
    if (rows == 0 || classes == 0) return;
    cuda_backend::primitive_kernels::
        cross_entropy_backward<<<grid(rows), cuda_backend::primitive_kernels::block, 0, cuda_backend::stream()>>>(
            gradient, probabilities, targets, weight, rows, classes, C(smoothing / double(classes)),
            C(1.0 - smoothing), scale);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  /// A warp a row, one launch.
  template <class T>
  static void softmax_rows(T* out, const T* in, index_t rows, index_t width, accumulate_t<T> scale,
                           repeated_rows<T> bias) {
    if (rows == 0 || width == 0) return;
    cuda_backend::primitive_kernels::softmax_rows<<<warp_grid(rows), block, 0, cuda_backend::stream()>>>(
        out, in, rows, width, scale, bias);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  /// A warp a row, one launch.
  template <class T>
  static void log_softmax_rows(accumulate_t<T>* out, const T* in, index_t rows, index_t width) {
    if (rows == 0 || width == 0) return;
    cuda_backend::primitive_kernels::log_softmax_rows<<<warp_grid(rows), block, 0, cuda_backend::stream()>>>(
        out, in, rows, width);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  template <class T>
  static void softmax_rows_backward(T* dx, bool add, const T* y, const T* dy, index_t rows, index_t width,
                                    accumulate_t<T> scale) {
    if (rows == 0 || width == 0) return;
    cuda_backend::primitive_kernels::softmax_rows_backward<<<warp_grid(rows), block, 0, cuda_backend::stream()>>>(
        dx, add, y, dy, rows, width, scale);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  /// A warp a row, one launch.
  template <class T>
  static void layer_norm_rows(T* out, accumulate_t<T>* row_mean, accumulate_t<T>* row_rstd, const T* in,
                              const T* gain, const T* bias, index_t rows, index_t width, accumulate_t<T> epsilon) {
    if (rows == 0) return;
    cuda_backend::primitive_kernels::layer_norm_rows<<<warp_grid(rows), block, 0, cuda_backend::stream()>>>(
        out, row_mean, row_rstd, in, gain, bias, rows, width, epsilon);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  /// One launch (layer_norm_backward_launch says its grid), rows in runs of 16 bytes where they allow.
  template <class T>
  static void layer_norm_rows_backward(T* dx, bool add, T* gain_grad, T* bias_grad, const T* dy, const T* in,
                                       const accumulate_t<T>* row_mean, const accumulate_t<T>* row_rstd, const T* gain,
                                       index_t rows, index_t width) {
    if (rows == 0 || (!dx && !gain_grad && !bias_grad)) return;
    const cuda_backend::primitive_kernels::layer_norm_backward_launch<accumulate_t<T>> launch(rows, width,
                                                                                              gain_grad || bias_grad);
    cuda_backend::scratch_ptr scratch = cuda_backend::allocate_scratch(launch.scratch_bytes);
    unsigned* counters = launch.counters(scratch.get(), width);
    if (counters) ATTN_CUDA_CHECK(cudaMemsetAsync(counters, 0, launch.counter_bytes(), cuda_backend::stream()));
    const auto kernel = cuda_backend::primitive_kernels::layer_norm_backward_kernel<T>(
        cuda_backend::primitive_kernels::layer_norm_backward_run(width, dx, dy, in, gain));
    kernel<<<unsigned(launch.blocks), block, 0, cuda_backend::stream()>>>(
        dx, add, gain_grad, bias_grad, dy, in, row_mean, row_rstd, gain, rows, width, launch.rows_a_block,
        launch.partial(scratch.get()), launch.group_partial(scratch.get(), width), counters);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  /// Every tensor in one launch (a multi-tensor kernel: a block per 64 Ki elements of any tensor).
  template <class T>
  static void adam_step(std::span<const adam_tensor<T>> tensors, const adam_coefficients& c) {
    cuda_backend::detail::multi_tensor(tensors).launch(cuda_backend::primitive_kernels::adam_step<T>, block,
                                                       T(c.beta1), T(c.beta2), T(1 - c.beta1), T(1 - c.beta2),
                                                       T(c.step_size), T(c.root_correction2), T(c.epsilon));
  }

  template <class T>
  static void fill(T* data, index_t count, T value) {
    if (count == 0) return;
    cuda_backend::primitive_kernels::
        fill<<<elements(count), cuda_backend::primitive_kernels::block, 0, cuda_backend::stream()>>>(data, count,
                                                                                                     value);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }

  /// A partial sum a block, then one block over the partials in a fixed order; waits.
  template <class T>
  static double sum_of_squares(std::span<const flat_array<const T>> arrays) {
    const cuda_backend::detail::multi_tensor launch(arrays);
    if (launch.blocks() == 0) return 0;
    const index_t count = launch.blocks();
    cuda_backend::scratch_ptr partial = cuda_backend::allocate_scratch(sizeof(double) * std::size_t(count + 1));
    double* partials = static_cast<double*>(partial.get());
    cuda_backend::primitive_kernels::sum_of_squares<<<launch.blocks(), block, 0, cuda_backend::stream()>>>(
        launch.arrays(), launch.chunks(), partials);
    cuda_backend::primitive_kernels::sum_partials<<<1, 1024, 0, cuda_backend::stream()>>>(partials, count,
                                                                                          partials + count);
    ATTN_CUDA_CHECK(cudaGetLastError());
    double total = 0;
    ATTN_CUDA_CHECK(
        cudaMemcpyAsync(&total, partials + count, sizeof total, cudaMemcpyDeviceToHost, cuda_backend::stream()));
    cuda_backend::synchronize();
    return total;
  }

  template <class T>
  static void scale(std::span<const flat_array<T>> arrays, double factor) {
    cuda_backend::detail::multi_tensor(arrays).launch(cuda_backend::primitive_kernels::scale<T>, block, factor);
  }

  /// One launch for every array: zeroing a model's gradients took a launch a parameter (254 in a
  /// base or big step, 2026-11-28's profile).
  template <class T>
  static void fill(std::span<const flat_array<T>> arrays, T value) {
    cuda_backend::detail::multi_tensor(arrays).launch(cuda_backend::primitive_kernels::fill_arrays<T>, block, value);
  }

 private:
  static constexpr int block = cuda_backend::primitive_kernels::block;
  /// A block a row, rows spread over the resident blocks.
  static unsigned grid(index_t rows) { return cuda_backend::detail::grid_for(rows * 128, 128); }
  /// Threads for a row of `width`: a warp multiple up to 256.
  static unsigned row_block(index_t width) {
    return unsigned(std::min<index_t>(256, std::max<index_t>(32, (width + 31) / 32 * 32)));
  }
  /// Blocks for a warp a row.
  static unsigned warp_grid(index_t rows) {
    return cuda_backend::detail::grid_for(rows * 32, cuda_backend::primitive_kernels::block);
  }
  /// Blocks for an elementwise loop over n.
  static unsigned elements(index_t n) {
    return cuda_backend::detail::grid_for(n, cuda_backend::primitive_kernels::block);
  }
};

}  // namespace attn
