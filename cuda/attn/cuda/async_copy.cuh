// Copies from global to shared memory that run while the block computes (cp.async, sm_80 and
// later; PTX ISA, "Data movement and conversion instructions: cp.async"): a thread issues 4- or
// 16-byte copies, closes them into a group, and later waits for its groups; a __syncthreads then
// makes every thread's copies visible to the block. FlashAttention-2 stages the next key and
// value tile this way while the tensor cores work on the current one. Under the CPU emulator a copy's
// destination holds garbage until a wait covers it, and a thread that exits with copies in
// flight throws (emulator.hpp).
#pragma once

namespace attn::cuda_backend::async_copy {

/// Starts copying 16 bytes from global `from` to shared `to`, both 16-byte aligned.
__device__ inline void copy_16_bytes(void* to, const void* from) {
#if defined(ATTN_CUDA_EMULATOR)
  cuda_emulator::detail::block_runner::instance().copy_async(to, from, 16);
#else
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(from) : "memory");
#endif
}

/// Starts copying 4 bytes from global `from` to shared `to`, both 4-byte aligned.
__device__ inline void copy_4_bytes(void* to, const void* from) {
#if defined(ATTN_CUDA_EMULATOR)
  cuda_emulator::detail::block_runner::instance().copy_async(to, from, 4);
#else
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(address), "l"(from) : "memory");
#endif
}

/// Closes the copies this thread has issued since the last commit into one group.
__device__ inline void commit() {
#if defined(ATTN_CUDA_EMULATOR)
  cuda_emulator::detail::block_runner::instance().commit_async_copies();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// Waits until at most `pending` of this thread's groups are still copying (the newest ones).
template <int pending>
__device__ inline void wait() {
#if defined(ATTN_CUDA_EMULATOR)
  cuda_emulator::detail::block_runner::instance().wait_async_copies(pending);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
#endif
}

}  // namespace attn::cuda_backend::async_copy
