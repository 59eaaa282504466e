// attn-translate for the tiny preset's widths on a GPU (built by nvcc in CUDA builds).
#include <attn/cuda/cuda.cuh>

#include "translate.hpp"

namespace attn::translator {
int translate_tiny_cuda(job& j) {
  cuda_backend::tf32_products() = j.opts.tf32;
  return translate<nn::tiny, cuda>(j);
}
}  // namespace attn::translator
