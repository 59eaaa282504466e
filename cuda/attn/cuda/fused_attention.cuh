// Fused attention on the GPU (core/fused_attention.hpp): fused_attention<cuda>, which turns a
// variant's score modification and mask rule into their device forms (score_modification.cuh,
// mask_rule.cuh) and launches the kernels through fused_attention_launch.cuh: on CUDA cores
// (fused_attention_kernels.cuh) in float, double, and bfloat16 and float16 widened to float, or,
// for the 16-bit types when enabled, on tensor cores (fused_attention_tensor_cores.cuh). Head
// dims up to 128, any lengths, padding, causal masks, a bias, grouped-query heads, dropout; the
// same bits every run, but for dQ on tensor cores, summed with atomics unless the problem asks
// for a deterministic backward.
#pragma once

#include <attn/core.hpp>
#include <limits>

#include "fused_attention_launch.cuh"
#include "launch.cuh"
#include "mask_rule.cuh"
#include "memory.cuh"
#include "score_modification.cuh"

namespace attn {

template <>
struct fused_attention<cuda> {
 private:
  using launch = cuda_backend::fused_attention_launch<cuda_backend::device_runtime>;

 public:
  static constexpr bool available = true;
  static constexpr index_t widest_head = launch::widest_head;
  // From 512 keys, where the tensor cores take the heads (fast_for). There, with
  // FlashAttention-3's batches, the kernel's forward + backward was 1.43-1.71x the products and
  // softmax at d = 64 and 0.95-1.13x at 128 (causal: 1.74-2.07x, 1.21-1.44x), 1.30-4.2x at 2048
  // keys (docs/benchmarks.md: "the fourth run", an H100, against the unfused path in "the first"
  // and "the second"), and its memory is O(n), theirs O(n^2). Shorter, in training on an H200
  // ("the fifth run") the two were level at sentences of 3-60 words and the kernel 0.66-0.68x at
  // 3-8 words: nn keeps the unfused path below 512 until a run times the lengths between
  // (`scripts/gpu.sh`'s `short`).
  static constexpr index_t automatic_from_keys = 512;
  static constexpr index_t automatic_from_queries = 64;  // a decoding step's few queries: unfused, as on the CPU
  // Bfloat16 and float16 on tensor cores. Float and double, 16-bit heads whose backward does not
  // fit the device's shared memory, and everything with ATTN_FUSED_TENSOR_CORES=0 take the CUDA
  // cores: forward + backward 0.04-0.52x the unfused path in fp32 at 2048 keys ("the first
  // run"), 0.81x in fp32 training ("the fifth").
  template <class T>
  static bool fast_for(index_t head_width) {
    return launch::template on_tensor_cores<T>(head_width);
  }
  static constexpr index_t automatic_modified_from_keys = std::numeric_limits<index_t>::max();
  static constexpr bool modifies_scores = true;

  template <class T, class Rule = every_pair, class Modification = unmodified>
  static void forward(const fused_attention_problem& p, const T* q, const T* k, const T* v, const T* bias, T* out,
                      accumulate_t<T>* log_sum_exp, Rule rule = {}, const Modification& modification = {}) {
    if (p.batch * p.heads * p.queries == 0) return;
    launch::forward(p, q, k, v, bias, out, log_sum_exp, cuda_backend::device_rule(rule),
                    cuda_backend::device_modification(modification));
  }

  /// d_modification (device memory, modification.gradient_size() numbers) receives the learned
  /// inputs' gradients; on the way they take a row of that many floats a query row (scratch).
  template <class T, class Rule = every_pair, class Modification = unmodified>
  static void backward(const fused_attention_problem& p, const T* q, const T* k, const T* v, const T* bias,
                       const T* out, const T* d_out, const accumulate_t<T>* log_sum_exp, T* d_q, T* d_k, T* d_v,
                       Rule rule = {}, const Modification& modification = {},
                       accumulate_t<T>* d_modification = nullptr) {
    launch::backward(p, q, k, v, bias, out, d_out, log_sum_exp, d_q, d_k, d_v, cuda_backend::device_rule(rule),
                     cuda_backend::device_modification(modification), d_modification);
  }
};

}  // namespace attn
