// tests/gpu/primitives_test.cu's checks with the GPU's row kernels (cuda/attn/cuda/
// primitives_kernels.cuh) run on the CPU emulator (attn/cuda/emulator.hpp): softmax rows
// forward and backward, log-softmax rows, LayerNorm rows forward and
// backward (its blocks' partial sums and the last block's total), block copies from a list of
// sources, row selection, attention masks, the loss forward and backward, and the
// embedding gradient's sums after the sort (on the host here, CUB's on the GPU). The other
// primitives (gathers by id, Adam, norms, fills) are the CPU's here. Memory is host
// memory, so the launches below take the kernels' host pointers; their grids are smaller than
// the GPU's (a few blocks), which sends the kernels' grid-stride loops round more often, and
// every other launch has a block's threads take their turns in reverse.
#include <attn/cuda/emulator.hpp>  // first: the kernels below are compiled for it

#include <attn/cuda/primitives_kernels.cuh>
#include <attn/attn.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace emulated {

using attn::accumulate_t;
using attn::index_t;
namespace kernels = attn::cuda_backend::primitive_kernels;
namespace emulator = attn::cuda_emulator;

/// emulator::launch, a block's threads taking their turns first to last at one call and last to
/// first at the next (emulator.hpp): a race over shared memory that one order hides, the other
/// shows, and the checks compare both kinds of call with the CPU's numbers.
inline bool reverse_next_launch = false;  // one for every kernel: the launches alternate, whatever they run

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, Args&&... args) {
  const bool reverse = reverse_next_launch;
  reverse_next_launch = !reverse_next_launch;
  const emulator::threads_in_reverse_while order(reverse);
  emulator::launch(kernel, grid, block, shared_bytes, std::forward<Args>(args)...);
}

/// The CPU's primitives, but for those below, which launch the GPU's kernels on the emulator as
/// primitives<cuda> launches them on a GPU.
struct primitives : attn::primitives<attn::cpu> {
  using base = attn::primitives<attn::cpu>;

  /// A warp a row, 8 a block, over at most 3 blocks.
  static dim3 warp_grid(index_t rows) {
    return dim3(unsigned(std::clamp<index_t>((rows + kernels::warps_a_block - 1) / kernels::warps_a_block, 1, 3)));
  }
  /// A block a row (or element run), over at most 5 blocks.
  static dim3 grid(index_t count) { return dim3(unsigned(std::clamp<index_t>(count, 1, 5))); }
  /// primitives<cuda>'s threads for a row of `width`: a warp multiple up to 256.
  static dim3 row_block(index_t width) {
    return dim3(unsigned(std::min<index_t>(256, std::max<index_t>(32, (width + 31) / 32 * 32))));
  }

  /// The GPU's run sums after the sort CUB's stable radix sort gives: (id, position) pairs by
  /// id, positions in order within an id.
  template <class T, class Id>
  static void scatter_add_rows(T* table, index_t width, const T* rows_in, const Id* ids, index_t count,
                               accumulate_t<T> scale) {
    if (count == 0) return;
    std::vector<index_t> positions(static_cast<std::size_t>(count));
    for (index_t i = 0; i < count; ++i) positions[std::size_t(i)] = i;
    std::stable_sort(positions.begin(), positions.end(), [&](index_t a, index_t b) { return ids[a] < ids[b]; });
    std::vector<Id> sorted_ids(positions.size());
    for (std::size_t i = 0; i < positions.size(); ++i) sorted_ids[i] = ids[positions[i]];
    emulated::launch(kernels::scatter_add_sorted<T, Id>, grid(count), row_block(width), 0, table, width, rows_in,
                     static_cast<const Id*>(sorted_ids.data()), static_cast<const index_t*>(positions.data()), count,
                     scale);
  }

  template <class T>
  static void select_rows(T* out, const T* in, index_t rows, index_t width, const index_t* keep, index_t count) {
    for (index_t i = 0; i < count; ++i)
      if (keep[i] < 0 || keep[i] >= rows)
        throw attn::extent_error("attn::select_rows", "rows",
                                 "has extent " + std::to_string(rows) + ", but row " + std::to_string(keep[i]) +
                                     " was kept");
    if (count == 0 || width == 0) return;
    emulated::launch(kernels::select_rows<T>, grid(count), row_block(width), 0, out, in, width, keep, count);
  }

  template <class T>
  static void copy_blocks(T* to, index_t to_stride, const T* from, index_t from_stride, index_t block, index_t count,
                          const index_t* sources = nullptr) {
    if (block == 0 || count == 0) return;
    if (sources == nullptr) return base::copy_blocks(to, to_stride, from, from_stride, block, count);  // a 2-D copy
    emulated::launch(kernels::copy_blocks_from<T>, grid(count), row_block(block), 0, to, to_stride, from,
                     from_stride, block, sources, count);
  }

  template <class T, class Id>
  static void attention_mask(T* bias, const Id* key_ids, index_t sentences, index_t queries, index_t keys, Id pad,
                             bool causal, T masked) {
    const index_t n = sentences * queries * keys;
    if (n == 0) return;
    emulated::launch(kernels::attention_mask<T, Id>, grid(n), dim3(kernels::block), 0, bias, key_ids, sentences,
                     queries, keys, pad, causal, masked);
  }

  /// primitives<cuda>'s launches: a block a row, then one block for the totals.
  template <class T, class Id>
  static attn::cross_entropy_totals cross_entropy(const T* logits, const Id* targets, index_t rows, index_t classes,
                                                  double smoothing, Id pad, accumulate_t<T>* probabilities,
                                                  accumulate_t<T>* weight) {
    if (rows == 0) return {};
    std::vector<double> per_row(std::size_t(2 * rows + 3));
    double* row_nll = per_row.data();
    double* row_smoothed = row_nll + rows;
    double* totals = row_smoothed + rows;
    unsigned long long bad = ~0ull;
    emulated::launch(kernels::cross_entropy_rows<T, Id>, grid(rows), dim3(kernels::block), 0, logits, targets, rows,
                     classes, smoothing, pad, probabilities, weight, row_nll, row_smoothed, &bad);
    emulated::launch(kernels::cross_entropy_totals<accumulate_t<T>>, dim3(1), dim3(1024), 0,
                     static_cast<const double*>(row_nll), static_cast<const double*>(row_smoothed),
                     static_cast<const accumulate_t<T>*>(weight), rows, totals);
    if (bad != ~0ull) throw attn::unknown_target(classes, static_cast<long long>(targets[bad]), index_t(bad));
    return {totals[0], totals[1], static_cast<index_t>(totals[2])};
  }

  template <class T, class Id>
  static void cross_entropy_backward(T* gradient, const accumulate_t<T>* probabilities, const Id* targets,
                                     const accumulate_t<T>* weight, index_t rows, index_t classes, double smoothing,
                                     accumulate_t<T> scale) {
    using C = accumulate_t<T>;
    if (rows == 0 || classes == 0) return;
    emulated::launch(kernels::cross_entropy_backward<T, Id>, grid(rows), dim3(kernels::block), 0, gradient,
                     probabilities, targets, weight, rows, classes, C(smoothing / double(classes)),
                     C(1.0 - smoothing), scale);
  }

  template <class T>
  static void softmax_rows(T* out, const T* in, index_t rows, index_t width, accumulate_t<T> scale,
                           attn::repeated_rows<T> bias) {
    if (rows == 0 || width == 0) return;
    emulated::launch(kernels::softmax_rows<T>, warp_grid(rows), dim3(kernels::block), 0, out, in, rows, width, scale,
                     bias);
  }

  template <class T>
  static void log_softmax_rows(accumulate_t<T>* out, const T* in, index_t rows, index_t width) {
    if (rows == 0 || width == 0) return;
    emulated::launch(kernels::log_softmax_rows<T>, warp_grid(rows), dim3(kernels::block), 0, out, in, rows, width);
  }

  template <class T>
  static void softmax_rows_backward(T* dx, bool add, const T* y, const T* dy, index_t rows, index_t width,
                                    accumulate_t<T> scale) {
    if (rows == 0 || width == 0) return;
    emulated::launch(kernels::softmax_rows_backward<T>, warp_grid(rows), dim3(kernels::block), 0, dx, add, y, dy,
                     rows, width, scale);
  }

  template <class T>
  static void layer_norm_rows(T* out, accumulate_t<T>* row_mean, accumulate_t<T>* row_rstd, const T* in,
                              const T* gain, const T* bias, index_t rows, index_t width, accumulate_t<T> epsilon) {
    if (rows == 0) return;
    emulated::launch(kernels::layer_norm_rows<T>, warp_grid(rows), dim3(kernels::block), 0, out, row_mean, row_rstd,
                     in, gain, bias, rows, width, epsilon);
  }

  template <class T>
  static void layer_norm_rows_backward(T* dx, bool add, T* gain_grad, T* bias_grad, const T* dy, const T* in,
                                       const accumulate_t<T>* row_mean, const accumulate_t<T>* row_rstd, const T* gain,
                                       index_t rows, index_t width) {
    if (rows == 0 || (!dx && !gain_grad && !bias_grad)) return;
    const kernels::layer_norm_backward_launch<accumulate_t<T>> launch(rows, width, gain_grad || bias_grad);
    const auto scratch = emulator::runtime::scratch(launch.scratch_bytes);
    unsigned* counters = launch.counters(scratch.get(), width);
    if (counters) emulator::runtime::zero(counters, launch.counter_bytes());
    // The last block of a group, and the last group, to finish add the sums: every other call
    // runs the blocks last to first, so that those are the first blocks of their groups.
    static bool reverse = false;
    reverse = !reverse;
    emulator::blocks_in_reverse() = reverse;
    struct in_order {
      ~in_order() { emulator::blocks_in_reverse() = false; }
    } restore;
    emulated::launch(kernels::layer_norm_backward_kernel<T>(kernels::layer_norm_backward_run(width, dx, dy, in, gain)),
                     dim3(unsigned(launch.blocks)), dim3(kernels::block), 0, dx,
                     add, gain_grad, bias_grad, dy, in, row_mean, row_rstd, gain, rows, width, launch.rows_a_block,
                     launch.partial(scratch.get()), launch.group_partial(scratch.get(), width), counters);
  }
};

}  // namespace emulated

#define ATTN_GPU_TEST_HOST
#define ATTN_GPU_TEST_PRIMITIVES emulated::primitives
#include "../../gpu/primitives_test.cu"
