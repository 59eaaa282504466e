// A block's dynamic shared memory (the launch's third argument), on a GPU and on the CPU emulator.
#pragma once

namespace attn::cuda_backend {

/// The block's dynamic shared memory as T, 16-byte aligned.
template <class T>
__device__ inline T* dynamic_shared_memory() {
#if defined(ATTN_CUDA_EMULATOR)
  return static_cast<T*>(cuda_emulator::dynamic_shared_memory());
#else
  extern __shared__ uint4 memory[];  // uint4: the alignment of a 16-byte vector
  return reinterpret_cast<T*>(memory);
#endif
}

}  // namespace attn::cuda_backend
