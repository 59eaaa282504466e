// The tensor-core fused attention kernels (cuda/attn/cuda/fused_attention_tensor_cores.cuh) as
// fused_attention<cuda> launches them for plain attention in bfloat16 (no rule, no
// modification), at head widths 32, 64 and 128, for bench/fused_attention_sass.sh to read
// ptxas's registers and spills and count their sm_90 SASS. Compiled only: nothing runs. The
// dK/dV kernel twice: with dQ's sums (the default backward) and without (the deterministic one,
// beside the dQ kernel). Then under ALiBi with learned slopes (its device form as
// fused_attention<cuda> makes it), at widths 64 and 128: the forward, dK/dV and the dQ kernel,
// which sums the slopes' gradient. And plain attention's four kernels on packed sentences (short
// ones, several a block), whose tiles all take the masked path. The script's build is the check
// that these still match the kernels.
#include <attn/cuda/fused_attention_launch.cuh>
#include <attn/cuda/score_modification.cuh>
#include <attn/grad/fused_attention.hpp>

namespace tensor_cores = attn::cuda_backend::fused_attention_tensor_cores;
using attn::bfloat16;
using problem = attn::fused_attention_problem;
using rule = attn::every_pair;
using plain = attn::cuda_backend::no_score_modification;

/// The forward, dK/dV and dQ kernels of width D under modification M.
#define ATTN_KERNELS(D, M)                                                                                            \
  template __global__ void tensor_cores::forward<D, bfloat16, rule, M>(                                              \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, bfloat16*, float*, rule, M,       \
      attn::index_t);                                                                                                \
  template __global__ void tensor_cores::backward_keys<D, bfloat16, rule, M>(                                        \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const float*,    \
      const float*, bfloat16*, bfloat16*, rule, M, float*, attn::index_t);                                           \
  template __global__ void tensor_cores::backward_queries<D, bfloat16, rule, M>(                                     \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const float*,    \
      const float*, bfloat16*, rule, M, float*, attn::index_t, attn::index_t);

/// The dK/dV kernel of width D that sums dQ too (the default backward's), without a modification.
#define ATTN_SUMMING_KERNEL(D)                                                                                        \
  template __global__ void tensor_cores::backward_keys<D, bfloat16, rule, plain, true>(                              \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const float*,    \
      const float*, bfloat16*, bfloat16*, rule, plain, float*, attn::index_t);

/// The same kernels on packed sentences (block_sentences), plain attention.
#define ATTN_PACKED_KERNELS(D)                                                                                        \
  template __global__ void tensor_cores::forward<D, bfloat16, rule, plain, true>(                                    \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, bfloat16*, float*, rule, plain,   \
      attn::index_t);                                                                                                \
  template __global__ void tensor_cores::backward_keys<D, bfloat16, rule, plain, false, true>(                       \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const float*,    \
      const float*, bfloat16*, bfloat16*, rule, plain, float*, attn::index_t);                                       \
  template __global__ void tensor_cores::backward_keys<D, bfloat16, rule, plain, true, true>(                        \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const float*,    \
      const float*, bfloat16*, bfloat16*, rule, plain, float*, attn::index_t);                                       \
  template __global__ void tensor_cores::backward_queries<D, bfloat16, rule, plain, true>(                           \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const float*,    \
      const float*, bfloat16*, rule, plain, float*, attn::index_t, attn::index_t);

ATTN_KERNELS(32, plain)
ATTN_KERNELS(64, plain)
ATTN_KERNELS(128, plain)
ATTN_SUMMING_KERNEL(32)
ATTN_SUMMING_KERNEL(64)
ATTN_SUMMING_KERNEL(128)
ATTN_PACKED_KERNELS(32)
ATTN_PACKED_KERNELS(64)
ATTN_PACKED_KERNELS(128)

namespace {
using B = attn::dim<"batch">;
using H = attn::dim<"heads">;
using Q = attn::dim<"queries">;
using K = attn::dim<"keys">;

/// ALiBi's device form over a learned slope a head (its type is all the kernels need).
auto alibi_form(const float* slopes) {
  using S = attn::shape<B, H, Q, K>;
  const attn::extents<S> scores(4, 16, 1024, 1024);
  const attn::tensor_view<const float, attn::shape<H>, attn::cuda> x(slopes, attn::extents<attn::shape<H>>(16));
  const auto alibi = [](const auto& s, const auto& m) {
    return s - attn::broadcast_like(m, s) * attn::abs(attn::index_along<Q>(s) - attn::index_along<K>(s));
  };
  return attn::cuda_backend::device_modification(
      attn::grad::detail::evaluate_modification_of<float, S, attn::cuda>(alibi, scores, {true}, x));
}
}  // namespace
using alibi = decltype(alibi_form(nullptr));

ATTN_KERNELS(64, alibi)
ATTN_KERNELS(128, alibi)
