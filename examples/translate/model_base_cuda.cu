// attn-translate for the base preset's widths on a GPU (built by nvcc in CUDA builds).
#include <attn/cuda/cuda.cuh>

#include "translate.hpp"

namespace attn::translator {
int translate_base_cuda(job& j) {
  cuda_backend::tf32_products() = j.opts.tf32;
  return translate<nn::base, cuda>(j);
}
}  // namespace attn::translator
