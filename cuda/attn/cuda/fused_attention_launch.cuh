// The host side of fused attention on the GPU: which kernels (fused_attention_kernels.cuh on
// CUDA cores, fused_attention_tensor_cores.cuh for bfloat16 and float16), their grids, scratch
// and the order of their launches. Written over a Runtime that launches kernels and owns
// scratch, so that the same code runs on a GPU (launch.cuh's device_runtime, for
// fused_attention<cuda>) and on the CPU emulator (emulator.hpp's runtime, for the tests that run
// the kernels where no GPU is). A Runtime provides
//   launch(kernel, grid, block, shared_bytes, args...)   a launch, its error checked
//   scratch(bytes)                                        memory, an owner with get()
//   zero(pointer, bytes)
//   allow_shared_memory(kernel, bytes)                    dynamic shared memory above 48 KiB
//   shared_memory_limit()                                 the most a block of the device may ask for
//   row_gradient_limit()                                  the scratch the learned inputs' gradients
//                                                         may take on the way (backward, below)
// A tensor-core kernel that needs more than the device's limit (dK/dV at head width 128 takes
// 103 KiB, 112 with the dQ sums; GPUs of compute capability 8.6, 8.9 and 12.x give a block 99)
// leaves that call to the CUDA-core kernels (the dQ sums alone: to the dQ kernel).
// The modification M is already in device form (score_modification.cuh's, or
// no_score_modification); both kinds of kernel evaluate it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <attn/core.hpp>
#include <attn/core/float16.hpp>

#include "fused_attention_kernels.cuh"
#include "fused_attention_tensor_cores.cuh"

namespace attn::cuda_backend {

template <class Runtime>
struct fused_attention_launch {
  /// The widest head the kernels are compiled for.
  static constexpr int widest_head = 128;

  /// Calls f with the smallest compiled head width (32, 64, 128) that holds d_k and d_v.
  template <class F>
  static void with_head_width(const fused_attention_problem& p, F&& f) {
    static_assert(widest_head == 128, "with_head_width: the compiled widths end at widest_head");
    const index_t d = p.d_k > p.d_v ? p.d_k : p.d_v;
    if (d <= 32) f(std::integral_constant<int, 32>{});
    else if (d <= 64) f(std::integral_constant<int, 64>{});
    else if (d <= 128) f(std::integral_constant<int, 128>{});
    else
      throw std::invalid_argument("attn::fused_attention<cuda>: head widths up to 128, not d_k " +
                                  std::to_string(p.d_k) + " / d_v " + std::to_string(p.d_v));
  }

  static unsigned blocks(index_t n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

  /// The kernels' grids take a block a (tile, head, sentence), and a GPU's grid at most 65 535
  /// blocks along its second and third axes (cudaErrorInvalidConfiguration past them).
  static void check_grid(const fused_attention_problem& p, const char* who) {
    constexpr index_t most = 65535;
    if (p.heads > most || p.batch > most)
      throw std::invalid_argument(std::string(who) + ": at most 65535 heads and 65535 sentences a call on the GPU, not " +
                                  std::to_string(p.heads) + " heads of " + std::to_string(p.batch) +
                                  " sentences; split the batch");
  }

  /// The tensor-core dK/dV kernel counts its steps (a query tile of a head of the group) in 32
  /// bits: at most 2³² − 1 of them, which would take 2³⁸ query rows, half a terabyte of Q at d_k = 1.
  static void check_query_tiles(const fused_attention_problem& p, const char* who) {
    namespace tensor_cores = fused_attention_tensor_cores;
    const index_t group = p.kv_heads > 0 ? p.heads / p.kv_heads : p.heads;
    const index_t query_tiles = (p.queries + tensor_cores::tile_rows - 1) / tensor_cores::tile_rows;
    if (group > 0 && query_tiles > index_t{0xffffffff} / group)
      throw std::invalid_argument(std::string(who) + ": " + std::to_string(group) + " query heads a key head, " +
                                  std::to_string(p.queries) +
                                  " queries: 2^32 or more tiles of 64 queries for one key head");
  }

  /// Whether T's attention in heads `width` wide runs on the tensor cores, forward and backward:
  /// a 16-bit type, the switch on (ATTN_FUSED_TENSOR_CORES), and each kernel's shared memory
  /// within the device's limit (dK/dV at width 128 takes 103 KiB: more than the 99 KiB of compute
  /// capability 8.6, 8.9 and 12.x). Elsewhere the CUDA cores take it, many times slower.
  template <class T>
  static bool on_tensor_cores(index_t width) {
    if (!is_float16_storage<T> || !fused_attention_tensor_cores::enabled() || width < 1 || width > widest_head)
      return false;
    fused_attention_problem p;
    p.d_k = p.d_v = width;
    return tensor_core_bytes(p) <= Runtime::shared_memory_limit();
  }

  /// The dynamic shared memory of p's tensor-core kernels, forward and backward: the larger.
  static std::size_t tensor_core_bytes(const fused_attention_problem& p) {
    namespace tensor_cores = fused_attention_tensor_cores;
    std::size_t bytes = 0;
    with_head_width(p, [&](auto width) {
      constexpr int D = decltype(width)::value;
      bytes = std::size_t(std::max(tensor_cores::backward_keys_bytes<D>, tensor_cores::key_value_tiles_bytes<D>));
    });
    return bytes;
  }

  /// Whether the tensor-core kernels take p: they address a head's rows with 32-bit offsets
  /// from its first, so a head's rows of q, k, v and out must span fewer than 2³¹ elements (with
  /// the heads in rows, a sentence of 2²⁰ tokens at 16 heads of 128; split apart, `heads` times
  /// as many). Where they do not, the CUDA-core kernels (64-bit offsets) take the call.
  static bool tensor_cores_address(const fused_attention_problem& p) {
    constexpr index_t most = 0x7fffffff;
    const std::pair<index_t, index_t> heads[] = {
        {p.queries, p.q_layout.row}, {p.queries, p.out_layout.row}, {p.keys, p.k_layout.row}, {p.keys, p.v_layout.row}};
    for (const auto& [rows, apart] : heads)
      if (apart > 0 && rows > most / apart) return false;
    return true;
  }

  /// Sentences a block of the tensor-core kernels takes (fused_attention_tensor_cores::
  /// block_sentences): where the heads lie in rows and a tile holds two sentences' queries and
  /// keys or more, as many as it holds (at most the batch); one elsewhere. Sentences of ten tokens
  /// had taken a block each, 54 of its 64 rows idle: at the toy corpus's lengths the fused path
  /// added 0.6 ms a base attention, forward and backward, to the unfused one's time (H200).
  static index_t sentences_a_block(const fused_attention_problem& p) {
    namespace tensor_cores = fused_attention_tensor_cores;
    const index_t longest = std::max(p.queries, p.keys);
    if (!p.heads_in_rows || longest == 0 || !tensor_cores::packs_sentences()) return 1;
    const index_t fit = tensor_cores::tile_rows / longest;
    return fit >= 2 ? std::max<index_t>(1, std::min(fit, p.batch)) : 1;
  }

  template <class T, class Rule, class M>
  static void forward(const fused_attention_problem& given, const T* q, const T* k, const T* v, const T* bias,
                      T* out, accumulate_t<T>* log_sum_exp, Rule rule, const M& modification) {
    namespace kernels = fused_attention_kernels;
    namespace tensor_cores = fused_attention_tensor_cores;
    check_problem(given, "attn::fused_attention<cuda>::forward");
    const fused_attention_problem p = given.laid_out();
    check_grid(p, "attn::fused_attention<cuda>::forward");
    if (p.batch * p.heads * p.queries == 0) return;
    with_head_width(p, [&](auto width) {
      constexpr int D = decltype(width)::value;
      if constexpr (is_float16_storage<T>) {
        constexpr int bytes = tensor_cores::key_value_tiles_bytes<D>;
        if (tensor_cores::enabled() && std::size_t(bytes) <= Runtime::shared_memory_limit() &&
            tensor_cores_address(p)) {
          const index_t packed = sentences_a_block(p);
          const auto kernel =
              packed > 1 ? tensor_cores::forward<D, T, Rule, M, true> : tensor_cores::forward<D, T, Rule, M>;
          Runtime::allow_shared_memory(kernel, bytes);
          const dim3 grid(blocks(p.queries, tensor_cores::forward_block_rows<D, M>), unsigned(p.heads),
                          blocks(p.batch, int(packed)));
          Runtime::launch(kernel, grid, dim3(tensor_cores::warps * 32), bytes, p, q, k, v, bias, out, log_sum_exp,
                          rule, modification, packed);
          return;
        }
      }
      const dim3 grid(blocks(p.queries, kernels::query_rows), unsigned(p.heads), unsigned(p.batch));
      Runtime::launch(kernels::forward<D, T, Rule, M>, grid, dim3(kernels::query_rows), 0, p, q, k, v, bias, out,
                      log_sum_exp, rule, modification);
    });
  }

  /// d_modification (modification.size numbers) receives the learned inputs' gradients; on the
  /// way they take a row of that many a query row (4 a row on tensor cores: a slot a lane of the
  /// row), in scratch.
  template <class T, class Rule, class M>
  static void backward(const fused_attention_problem& given, const T* q, const T* k, const T* v, const T* bias,
                       const T* out, const T* d_out, const accumulate_t<T>* log_sum_exp, T* d_q, T* d_k, T* d_v,
                       Rule rule, const M& modification, accumulate_t<T>* d_modification) {
    namespace kernels = fused_attention_kernels;
    namespace tensor_cores = fused_attention_tensor_cores;
    using A = accumulate_t<T>;
    check_problem(given, "attn::fused_attention<cuda>::backward");
    const fused_attention_problem p = given.laid_out();
    check_grid(p, "attn::fused_attention<cuda>::backward");
    check_query_tiles(p, "attn::fused_attention<cuda>::backward");
    const index_t rows = p.batch * p.heads * p.queries;
    index_t inputs = 0;
    if constexpr (M::modifies) inputs = d_modification != nullptr ? modification.size : 0;
    // The learned inputs' gradients take `inputs` floats a slot on the way, a slot a query row
    // (a lane of the row on tensor cores): a launch of the dQ kernel takes as many sentences as
    // keep that within the runtime's limit (256 MiB on a GPU), and their slots are summed into
    // d_modification after it, launch after launch (a fixed order: the same bits). Where one
    // sentence's four slots a row would not fit and one would, the backward runs on CUDA cores.
    const std::size_t row_gradient_limit = Runtime::row_gradient_limit();
    const std::size_t row_bytes = static_cast<std::size_t>(p.heads * p.queries * inputs) * sizeof(A);
    // The dK/dV kernel's dynamic shared memory when it sums dQ too (tensor_core_bytes: the
    // backward's kernels' otherwise).
    std::size_t summing_bytes = 0;
    with_head_width(p, [&](auto width) {
      summing_bytes = std::size_t(tensor_cores::backward_keys_bytes<decltype(width)::value, true>);
    });
    const bool on_tensor_cores = is_float16_storage<T> && tensor_cores::enabled() && tensor_cores_address(p) &&
                                 tensor_core_bytes(p) <= Runtime::shared_memory_limit() &&
                                 row_bytes * tensor_cores::gradient_slots <= row_gradient_limit;
    // dQ summed by the dK/dV kernel with atomics (FlashAttention-2's backward) unless the caller
    // asks for the same bits every run (p.deterministic) or the learned inputs want the dQ
    // kernel's slots.
    const bool sums_queries = on_tensor_cores && !p.deterministic && inputs == 0 && rows * p.d_k > 0 &&
                              summing_bytes <= Runtime::shared_memory_limit();
    // Each row's D = rowsum(dO ⊙ O) (times dot_factor on tensor cores), and there its
    // log-sum-exp times log2 e too (row_terms).
    const auto scratch = Runtime::scratch(static_cast<std::size_t>(rows) * sizeof(A) * (on_tensor_cores ? 2 : 1));
    A* const dots = static_cast<A*>(scratch.get());
    const A* const row_log_sum_exp = on_tensor_cores ? dots + rows : log_sum_exp;  // times log2 e on tensor cores
    const auto prepare_rows = [&] {
      if constexpr (is_float16_storage<T>) {
        if (on_tensor_cores) {
          Runtime::launch(tensor_cores::row_terms<T>, dim3(blocks(rows, 256)), dim3(256), 0, p, d_out, out,
                          log_sum_exp, tensor_cores::dot_factor<M>(p.scale), dots, dots + rows, rows);
          return;
        }
      }
      Runtime::launch(kernels::row_dots<T>, dim3(blocks(rows, 256)), dim3(256), 0, p, d_out, out, dots, rows);
    };
    if (rows > 0) prepare_rows();
    const index_t slots = on_tensor_cores ? tensor_cores::gradient_slots : 1;
    const std::size_t sentence_bytes = row_bytes * std::size_t(slots);
    if (sentence_bytes > row_gradient_limit)
      throw std::invalid_argument(
          "attn::fused_attention<cuda>: the score modification's learned inputs (" + std::to_string(inputs) +
          " numbers) would take " + std::to_string(sentence_bytes) + " bytes of scratch for one sentence's " +
          std::to_string(p.heads * p.queries) + " query rows (at most " + std::to_string(row_gradient_limit) +
          " bytes); use the unfused path (nn::attention_path::unfused)");
    index_t sentences_a_launch =
        sentence_bytes > 0  // 0: no learned inputs, or no query rows
            ? std::max<index_t>(1, std::min<index_t>(p.batch, index_t(row_gradient_limit / sentence_bytes)))
            : std::max<index_t>(1, p.batch);
    // The tensor-core kernels' sentences a block; a launch of the dQ kernel takes whole blocks.
    const index_t packed = on_tensor_cores ? std::min(sentences_a_block(p), sentences_a_launch) : 1;
    if (sentences_a_launch < p.batch) sentences_a_launch -= sentences_a_launch % packed;
    const auto row_gradients = Runtime::scratch(static_cast<std::size_t>(sentences_a_launch) * sentence_bytes);
    A* const input_gradients = static_cast<A*>(row_gradients.get());
    with_head_width(p, [&](auto width) {
      constexpr int D = decltype(width)::value;
      if constexpr (is_float16_storage<T>) {
        if (sums_queries) {
          // dK, dV and dQ's float sums (laid out as dQ) in one kernel, then dQ rounded to T.
          const std::size_t elements = static_cast<std::size_t>(rows * p.d_k);
          const auto sums_owner = Runtime::scratch(elements * sizeof(float));
          float* const sums = static_cast<float*>(sums_owner.get());
          Runtime::zero(sums, elements * sizeof(float));
          if (p.batch * p.kv_heads * p.keys > 0) {
            constexpr int bytes = tensor_cores::backward_keys_bytes<D, true>;
            const auto kernel = packed > 1 ? tensor_cores::backward_keys<D, T, Rule, M, true, true>
                                           : tensor_cores::backward_keys<D, T, Rule, M, true>;
            Runtime::allow_shared_memory(kernel, bytes);
            const dim3 grid(blocks(p.keys, tensor_cores::block_rows), unsigned(p.kv_heads),
                            blocks(p.batch, int(packed)));
            Runtime::launch(kernel, grid, dim3(tensor_cores::warps * 32), bytes, p, q, k, v, bias, d_out,
                            row_log_sum_exp, dots, d_k, d_v, rule, modification, sums, packed);
          }
          Runtime::launch(kernels::rounded<T>, dim3(blocks(index_t(elements), 256)), dim3(256), 0,
                          static_cast<const float*>(sums), d_q, index_t(elements));
          return;
        }
      }
      // dK and dV; then dQ, a group of sentences at a time.
      const auto keys_and_values = [&] {
        if constexpr (is_float16_storage<T>) {
          if (on_tensor_cores) {
            constexpr int bytes = tensor_cores::backward_keys_bytes<D>;
            const auto kernel = packed > 1 ? tensor_cores::backward_keys<D, T, Rule, M, false, true>
                                           : tensor_cores::backward_keys<D, T, Rule, M>;
            Runtime::allow_shared_memory(kernel, bytes);  // above 48 KiB a kernel must ask, on each device
            const dim3 grid(blocks(p.keys, tensor_cores::block_rows), unsigned(p.kv_heads),
                            blocks(p.batch, int(packed)));
            Runtime::launch(kernel, grid, dim3(tensor_cores::warps * 32), bytes, p, q, k, v, bias, d_out,
                            row_log_sum_exp, dots, d_k, d_v, rule, modification, static_cast<float*>(nullptr), packed);
            return;
          }
        }
        const dim3 grid(blocks(p.keys, kernels::key_rows), unsigned(p.kv_heads), unsigned(p.batch));
        Runtime::launch(kernels::backward_keys<D, T, Rule, M>, grid, dim3(kernels::key_rows), 0, p, q, k, v, bias,
                        d_out, log_sum_exp, dots, d_k, d_v, rule, modification);
      };
      const auto queries = [&](index_t first, index_t sentences) {
        if constexpr (is_float16_storage<T>) {
          if (on_tensor_cores) {
            constexpr int bytes = tensor_cores::key_value_tiles_bytes<D>;
            const auto kernel = packed > 1 ? tensor_cores::backward_queries<D, T, Rule, M, true>
                                           : tensor_cores::backward_queries<D, T, Rule, M>;
            Runtime::allow_shared_memory(kernel, bytes);
            const dim3 grid(blocks(p.queries, tensor_cores::block_rows), unsigned(p.heads),
                            blocks(sentences, int(packed)));
            Runtime::launch(kernel, grid, dim3(tensor_cores::warps * 32), bytes, p, q, k, v, bias, d_out,
                            row_log_sum_exp, dots, d_q, rule, modification, input_gradients, first, packed);
            return;
          }
        }
        const dim3 grid(blocks(p.queries, kernels::query_rows), unsigned(p.heads), unsigned(sentences));
        Runtime::launch(kernels::backward_queries<D, T, Rule, M>, grid, dim3(kernels::query_rows), 0, p, q, k, v,
                        bias, d_out, log_sum_exp, dots, d_q, rule, modification, input_gradients, first);
      };
      if (p.batch * p.kv_heads * p.keys > 0) keys_and_values();
      for (index_t first = 0; first < p.batch && p.heads * p.queries > 0; first += sentences_a_launch) {
        const index_t sentences = std::min(sentences_a_launch, p.batch - first);
        if (inputs > 0) Runtime::zero(input_gradients, static_cast<std::size_t>(sentences) * sentence_bytes);
        queries(first, sentences);
        if (inputs > 0)
          Runtime::launch(kernels::sum_rows<A>, dim3(unsigned(inputs)), dim3(256), 0, input_gradients,
                          d_modification, sentences * p.heads * p.queries * slots, inputs, first > 0);
      }
      if (inputs > 0 && p.batch * p.heads * p.queries == 0)  // no rows: no gradient
        Runtime::zero(d_modification, static_cast<std::size_t>(inputs) * sizeof(A));
    });
  }
};

}  // namespace attn::cuda_backend
