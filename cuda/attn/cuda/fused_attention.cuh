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
  static constexpr bool available = true;
  // Never chosen automatically: nn takes it only when asked (context::path). In training on an
  // H200 (2026-11-28, docs/benchmarks.md "GPU: the fifth run") the fused path was level with
  // products and a softmax at sentences of 3-60 words in bf16 (1.01x a step), slower at 3-8
  // words (0.66-0.68x) and in fp32 (0.81x, CUDA cores): nothing for it to gain automatically yet.
  static constexpr index_t automatic_from_keys = std::numeric_limits<index_t>::max();
  static constexpr index_t automatic_from_queries = std::numeric_limits<index_t>::max();
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

 private:
  using launch = cuda_backend::fused_attention_launch<cuda_backend::device_runtime>;
};

}  // namespace attn
