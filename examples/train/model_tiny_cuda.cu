// attn-train for the tiny preset's widths on a GPU (built by nvcc in CUDA builds).
#include <attn/cuda/cuda.cuh>

#include "run.hpp"

namespace attn::trainer {
int train_tiny_cuda(session& s) {
  cuda_backend::tf32_products() = s.opts.tf32;
  return run<nn::tiny, cuda>(s);
}
}  // namespace attn::trainer
