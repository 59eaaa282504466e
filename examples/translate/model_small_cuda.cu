// attn-translate for the small preset's widths on a GPU (built by nvcc in CUDA builds).
#include <attn/cuda/cuda.cuh>

#include "translate.hpp"

namespace attn::translator {
int translate_small_cuda(job& j) {
  cuda_backend::tf32_products() = j.opts.tf32;
  return translate<nn::small, cuda>(j);
}
}  // namespace attn::translator
