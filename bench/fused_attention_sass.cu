// The tensor-core fused attention kernels (cuda/attn/cuda/fused_attention_tensor_cores.cuh) as
// fused_attention<cuda> launches them for plain attention in bfloat16 (no rule, no
// modification), at head widths 32, 64 and 128, for bench/fused_attention_sass.sh to read
// ptxas's registers and spills and count their sm_90 SASS. Compiled only: nothing runs. The
// dK/dV kernel twice: with dQ's sums (the default backward) and without (the deterministic one,
// beside the dQ kernel). The script's build is the check that these still match the kernels.
#include <attn/cuda/fused_attention_launch.cuh>

namespace tensor_cores = attn::cuda_backend::fused_attention_tensor_cores;
using attn::bfloat16;
using problem = attn::fused_attention_problem;
using rule = attn::every_pair;
using plain = attn::cuda_backend::no_score_modification;

#define ATTN_KERNELS(D)                                                                                               \
  template __global__ void tensor_cores::forward<D, bfloat16, rule, plain>(                                          \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, bfloat16*, float*, rule, plain);  \
  template __global__ void tensor_cores::backward_keys<D, bfloat16, rule, plain>(                                    \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const float*,    \
      const float*, bfloat16*, bfloat16*, rule, plain, float*);                                                      \
  template __global__ void tensor_cores::backward_keys<D, bfloat16, rule, plain, true>(                              \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const float*,    \
      const float*, bfloat16*, bfloat16*, rule, plain, float*);                                                      \
  template __global__ void tensor_cores::backward_queries<D, bfloat16, rule, plain>(                                 \
      problem, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const bfloat16*, const float*,    \
      const float*, bfloat16*, rule, plain, float*, attn::index_t);

ATTN_KERNELS(32)
ATTN_KERNELS(64)
ATTN_KERNELS(128)
