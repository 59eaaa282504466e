// Warp-level tensor-core products (mma.sync m16n8k16, sm_80 and later) on bfloat16 or float16
// with float accumulation, and the fragment loads around them. A warp multiplies a 16 × 16 tile
// A by a 16 × 8 tile B into a 16 × 8 float tile C; lane l holds, with g = l / 4 and t = l % 4
// (PTX ISA, "Matrix fragments for mma.m16n8k16"):
//   A  4 registers of two 16-bit numbers: rows g and g + 8, columns 2t, 2t + 1 and 2t + 8, 2t + 9,
//      in the order (g, 2t…), (g + 8, 2t…), (g, 2t + 8…), (g + 8, 2t + 8…);
//   B  2 registers: rows (k) 2t, 2t + 1 and 2t + 8, 2t + 9 of column (n) g;
//   C  4 floats: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
// Two C tiles side by side (columns 0–7 and 8–15) are, packed, the A fragment of the 16 × 16
// tile they make: FlashAttention's way of feeding softmax(S) to the next product without
// shared memory. Under the CPU emulator (emulator.hpp) each instruction is its twin there.
#pragma once

#include <attn/core/float16.hpp>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace attn::cuda_backend::mma {

using fragment_a = std::uint32_t[4];
using fragment_b = std::uint32_t[2];
using accumulator = float[4];

/// The lane's row-group g and thread-in-group t.
__device__ inline int group() { return int(threadIdx.x % 32) / 4; }
__device__ inline int in_group() { return int(threadIdx.x % 32) % 4; }

/// c += a · b, T bfloat16 or float16.
template <class T>
__device__ inline void multiply_add(accumulator& c, const fragment_a& a, const fragment_b& b) {
  static_assert(std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>, "mma: bfloat16 or float16");
#if defined(ATTN_CUDA_EMULATOR)
  cuda_emulator::ptx::mma_m16n8k16<T>(c, a, b);
#else
  if constexpr (std::is_same_v<T, bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/// Two floats rounded to T (to nearest, ties to even) in one register, `low` the lower column.
template <class T>
__device__ inline std::uint32_t pack(float low, float high) {
#if defined(ATTN_CUDA_EMULATOR)
  return cuda_emulator::ptx::cvt_pack<T>(high, low);
#else
  std::uint32_t packed;
  if constexpr (std::is_same_v<T, bfloat16>)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(high), "f"(low));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(high), "f"(low));
  return packed;
#endif
}

/// The A fragment of the 16 × 16 tile made of the C tiles `left` (columns 0–7) and `right` (8–15).
template <class T>
__device__ inline void to_a(fragment_a& a, const accumulator& left, const accumulator& right) {
  a[0] = pack<T>(left[0], left[1]);
  a[1] = pack<T>(left[2], left[3]);
  a[2] = pack<T>(right[0], right[1]);
  a[3] = pack<T>(right[2], right[3]);
}

/// Two adjacent 16-bit numbers of shared memory as one register (the lower address low).
__device__ inline std::uint32_t pair(const std::uint16_t* at) {
#if defined(ATTN_CUDA_EMULATOR)
  if (reinterpret_cast<std::uintptr_t>(at) % 4 != 0)
    throw cuda_emulator::kernel_error("attn::cuda_backend::mma::pair: a 32-bit load from an address not 4-byte aligned");
  std::uint32_t both;  // a host compiler's aliasing rules
  std::memcpy(&both, at, sizeof both);
  return both;
#else
  return *reinterpret_cast<const std::uint32_t*>(at);
#endif
}

/// Stores `both` (two 16-bit numbers, the lower one first) at `at` in shared memory, 4-byte aligned.
__device__ inline void store_pair(std::uint16_t* at, std::uint32_t both) {
#if defined(ATTN_CUDA_EMULATOR)
  if (reinterpret_cast<std::uintptr_t>(at) % 4 != 0)
    throw cuda_emulator::kernel_error("attn::cuda_backend::mma::store_pair: a 32-bit store to an address not 4-byte aligned");
  std::memcpy(at, &both, sizeof both);
#else
  *reinterpret_cast<std::uint32_t*>(at) = both;
#endif
}

/// The A fragment of the 16 × 16 tile at `x` (row-major, `stride` numbers a row, 4-byte aligned).
__device__ inline void load_a(fragment_a& a, const std::uint16_t* x, int stride) {
  const int g = group(), t = in_group();
  a[0] = pair(x + g * stride + 2 * t);
  a[1] = pair(x + (g + 8) * stride + 2 * t);
  a[2] = pair(x + g * stride + 2 * t + 8);
  a[3] = pair(x + (g + 8) * stride + 2 * t + 8);
}

/// ldmatrix .x4: four 8 × 8 blocks of 16-bit numbers from shared memory, lane l giving the
/// address of row l % 8 of block l / 8 (16-byte aligned); lane (g, t) receives in r[m] block m's
/// row g, columns 2t, 2t + 1, or with `transposed` its column g, rows 2t, 2t + 1.
template <bool transposed>
__device__ inline void load_blocks(std::uint32_t (&r)[4], const std::uint16_t* row) {
#if defined(ATTN_CUDA_EMULATOR)
  cuda_emulator::ptx::ldmatrix_x4<transposed>(r, row);
#else
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
#endif
}

/// load_a through ldmatrix: one instruction where load_a takes four 32-bit loads, for a tile in
/// shared memory whose rows are 16-byte aligned (blocks (m 0–7, k 0–7), (m 8–15, k 0–7),
/// (m 0–7, k 8–15), (m 8–15, k 8–15) are A's a[0] … a[3], lane (g, t) given row g, columns 2t…).
__device__ inline void load_a_blocks(fragment_a& a, const std::uint16_t* x, int stride) {
  const int lane = int(threadIdx.x % 32);
  load_blocks<false>(a, x + lane % 16 * stride + lane / 16 * 8);
}

/// The A fragment of the 16 × 16 tile Aᵀ at `x`: x holds column k of A as its row k (A[m][k] at
/// x[k · stride + m], as a warp's Sᵀ accumulators, stored row by row, hold S): ldmatrix
/// transposes the four 8 × 8 blocks as it loads them. Rows 16-byte aligned.
__device__ inline void load_a_transposed(fragment_a& a, const std::uint16_t* x, int stride) {
  const int lane = int(threadIdx.x % 32);
  // Blocks (k 0–7, m 0–7), (k 0–7, m 8–15), (k 8–15, m 0–7), (k 8–15, m 8–15), which .trans hands
  // lane (g, t) as A's (g, 2t…), (g + 8, 2t…), (g, 2t + 8…), (g + 8, 2t + 8…).
  load_blocks<true>(a, x + (lane / 16 * 8 + lane % 8) * stride + (lane / 8) % 2 * 8);
}

/// The B fragment of the 16 × 8 tile Bᵀ at `x`: x holds column n of B as its row n (B[k][n] at
/// x[n · stride + k]), as keys hold the columns of Kᵀ.
__device__ inline void load_b_from_rows(fragment_b& b, const std::uint16_t* x, int stride) {
  const int g = group(), t = in_group();
  b[0] = pair(x + g * stride + 2 * t);
  b[1] = pair(x + g * stride + 2 * t + 8);
}

/// The B fragments of the two 16 × 8 tiles Bᵀ at `x` and 8 rows on (columns 0–7 and 8–15 of B,
/// stored as load_b_from_rows takes them) in one ldmatrix: half the loads. Rows 16-byte aligned.
__device__ inline void load_b_pair_from_rows(fragment_b& first, fragment_b& second, const std::uint16_t* x,
                                             int stride) {
  const int lane = int(threadIdx.x % 32);
  // Lane l gives the address of row l % 8 of block l / 8: blocks (n 0–7, k 0–7), (n 0–7, k 8–15),
  // (n 8–15, k 0–7), (n 8–15, k 8–15); without .trans lane (g, t) receives row g, columns 2t, 2t + 1.
  std::uint32_t r[4];
  load_blocks<false>(r, x + (lane / 16 * 8 + lane % 8) * stride + (lane / 8) % 2 * 8);
  first[0] = r[0], first[1] = r[1], second[0] = r[2], second[1] = r[3];
}

/// The B fragments of two 16 × 8 tiles side by side (columns 0–7 into `left`, 8–15 into `right`)
/// of the 16 × 16 tile at `x` stored as it is multiplied (B[k][n] at x[k · stride + n], as values
/// are): ldmatrix transposes 8 × 8 blocks as it loads them. Rows 16-byte aligned.
__device__ inline void load_b_transposed(fragment_b& left, fragment_b& right, const std::uint16_t* x, int stride) {
  const int lane = int(threadIdx.x % 32);
  // Lane l gives the address of row l % 8 of block l / 8: blocks (k 0–7, n 0–7), (k 8–15, n 0–7),
  // (k 0–7, n 8–15), (k 8–15, n 8–15).
  std::uint32_t r[4];
  load_blocks<true>(r, x + ((lane / 8) % 2 * 8 + lane % 8) * stride + lane / 16 * 8);
  left[0] = r[0], left[1] = r[1], right[0] = r[2], right[1] = r[3];
}

}  // namespace attn::cuda_backend::mma
