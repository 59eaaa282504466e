// attn-train for the base preset's widths on a GPU (built by nvcc in CUDA builds).
#include <attn/cuda/cuda.cuh>

#include "run.hpp"

namespace attn::trainer {
int train_base_cuda(session& s) {
  cuda_backend::tf32_products() = s.opts.tf32;
  return run<nn::base, cuda>(s);
}
}  // namespace attn::trainer
