// attn-train for the big preset's widths on a GPU (built by nvcc in CUDA builds).
#include <attn/cuda/cuda.cuh>

#include "run.hpp"

namespace attn::trainer {
int train_big_cuda(session& s) {
  cuda_backend::tf32_products() = s.opts.tf32;
  return run<nn::big, cuda>(s);
}
}  // namespace attn::trainer
