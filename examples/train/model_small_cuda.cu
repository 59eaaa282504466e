// attn-train for the small preset's widths on a GPU (built by nvcc in CUDA builds).
#include <attn/cuda/cuda.cuh>

#include "run.hpp"

namespace attn::trainer {
int train_small_cuda(session& s) {
  cuda_backend::tf32_products() = s.opts.tf32;
  return run<nn::small, cuda>(s);
}
}  // namespace attn::trainer
