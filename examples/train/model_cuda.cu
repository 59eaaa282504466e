// attn-train for one preset's widths in one precision on a GPU (built by nvcc in CUDA builds),
// compiled as model.cpp is (examples/meson.build).
#include <attn/cuda/cuda.cuh>

#include "run.hpp"

namespace attn::trainer {
int ATTN_TRAIN_FUNCTION(session& s) {
  cuda_backend::tf32_products() = s.opts.tf32;  // --precision tf32: float products on tensor cores
  return run<nn::ATTN_PRESET, cuda, ATTN_ACTIVATION>(s);
}
}  // namespace attn::trainer
