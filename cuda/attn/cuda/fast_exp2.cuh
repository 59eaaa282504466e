// 2^x in one instruction (ex2.approx.ftz.f32; PTX ISA, "Floating point instructions: ex2"):
// exp2f without --use_fast_math adds a range check and two conditional multiplies around it to
// keep subnormal results, four instructions a weight where a softmax over float scores needs
// neither (a weight below 2^-126 next to the row's maximum, 1, changes no sum). FlashAttention
// computes its weights so too. Under the CPU emulator: the host's exp2, flushed the same way.
#pragma once

namespace attn::cuda_backend {

/// 2^x to within 2 ulp, 0 where that is below 2^-126 (float's normal range); 2^−∞ = 0.
__device__ inline float fast_exp2(float x) {
#if defined(ATTN_CUDA_EMULATOR)
  return cuda_emulator::ptx::ex2_approx_ftz(x);
#else
  float power;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(power) : "f"(x));
  return power;
#endif
}

}  // namespace attn::cuda_backend
