// The kernel that evaluates an elementwise plan (elementwise.cuh builds the plan and launches
// it): device code alone, so that the CPU emulator (emulator.hpp) runs it too.
//
// An elementwise pass is bound by memory, and a GPU keeps its memory busy only with enough
// bytes in flight: about latency × bandwidth, some 2 MB on an H100 (3.35 TB/s, 600-odd ns).
// A thread that loads one 16-bit element, then stores it, then loads the next has 2 bytes in
// flight an operand: 0.5 MB with every thread of the GPU resident. So each thread computes
// `elementwise_unroll` elements before it stores any, a grid's width apart: their loads have no
// store between them and are issued together, and each of them is still one coalesced access a
// warp (strided_in_rounds, which the loss's kernels in primitives_kernels.cuh use too).
#pragma once

#include <attn/core.hpp>

namespace attn::cuda_backend {

/// Elements a thread computes before it stores them (the loads of a round in flight together).
inline constexpr int elementwise_unroll = 4;

/// store(i, load(i)) for i = first, first + step, … below end, in rounds of Unroll: a round's
/// values are all loaded (and computed) before any is stored, so their loads are in flight
/// together. A store writes only where its own round loaded, so the output may be the memory
/// an element is read from (a gradient written over the probabilities it is computed from).
/// Needs end + Unroll·step to fit in Index (the kernels' 32-bit indices serve up to 2³¹ − 1
/// elements with a grid of under 2²⁰ threads).
template <int Unroll, class Index, class Load, class Store>
__device__ __forceinline__ void strided_in_rounds(Index i, const Index end, const Index step, const Load& load,
                                                   const Store& store) {
  static_assert(Unroll >= 1);
  using value = decltype(load(i));
  // Whole rounds while i + (Unroll - 1)·step < end (end - span is taken only when end > span).
  const Index span = static_cast<Index>(Unroll - 1) * step;
  if (end > span) {
    for (; i < end - span; i += static_cast<Index>(Unroll) * step) {
      value v[Unroll];
#pragma unroll
      for (int k = 0; k < Unroll; ++k) v[k] = load(i + static_cast<Index>(k) * step);
#pragma unroll
      for (int k = 0; k < Unroll; ++k) store(i + static_cast<Index>(k) * step, v[k]);
    }
  }
  // What is left, fewer than Unroll elements: one round with each element's bound checked, so
  // that a thread with only a few elements (a tensor below Unroll grids' worth) loads them
  // together too.
  if (i < end) {
    value v[Unroll]{};
#pragma unroll
    for (int k = 0; k < Unroll; ++k)
      if (i + static_cast<Index>(k) * step < end) v[k] = load(i + static_cast<Index>(k) * step);
#pragma unroll
    for (int k = 0; k < Unroll; ++k)
      if (i + static_cast<Index>(k) * step < end) store(i + static_cast<Index>(k) * step, v[k]);
  }
}

/// out[i] = plan(i) for every i below size, in a grid-stride loop of rounds of Unroll elements,
/// each rounded to T as it is stored (T a 16-bit type: the plan computes in float).
template <class Plan, class T, class Index, int Unroll = elementwise_unroll>
__global__ void __launch_bounds__(256)
    elementwise_kernel(const Plan plan, T* __restrict__ out, const Index size) {
  using value = decltype(plan(Index{}));
  strided_in_rounds<Unroll>(
      static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x, size,
      static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x), [&](Index i) { return plan(i); },
      [&](Index i, value v) { out[i] = static_cast<T>(v); });
}

}  // namespace attn::cuda_backend
