// The generated elementwise kernel a run of elements at a time. Where every node of a plan reads
// its operands in runs of V consecutive elements that start at a multiple of V (V: 16 bytes of
// the destination's type, 8 in 16 bits), a thread computes V elements from one index computation
// and reads and writes each operand with 16-byte accesses: a permute or broadcast divides its
// index once a run, not once an element, and a warp's access covers 512 bytes, not 64. The
// heads' permutes, which keep the head width innermost, ran at 1.0 TB/s a thread an element on an
// H100, 11 % of a big bf16 step (docs/benchmarks.md, "GPU: the fifth run"); ReLU's backward, a
// plain elementwise pass, at 2.05.
//
// vector_plan<Plan> says, on the host, whether a plan's runs are contiguous (contiguous) and, on
// the device, reads a run (read<V>). A broadcast along the innermost dimension (a value a row)
// repeats one element of its operand over the run. Anything else (a permute that moves the
// innermost dimension, a slice or an innermost extent not a multiple of V, a misaligned leaf)
// takes the element-at-a-time kernel (elementwise_kernel.cuh), as does a tree with a node this
// file does not know or a select of integers (vector_plan<Plan>::supported). Device code and host checks alone, no CUDA
// run-time: the CPU emulator runs this kernel against the other one
// (tests/unit/cuda/elementwise_emulated_test.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <attn/core.hpp>

#include "elementwise_kernel.cuh"
#include "index_plans.cuh"
#include "plan_nodes.cuh"

namespace attn::cuda_backend {

/// Elements a thread takes at a time on the vector path: 16 bytes of the destination's type.
template <class T>
inline constexpr int vector_width = sizeof(T) >= 16 ? 1 : int(16 / sizeof(T));

/// Runs a thread takes before it stores any (strided_in_rounds): two runs of 16 bytes an operand
/// in flight, where the element-at-a-time kernel's four 16-bit elements are 8 bytes.
inline constexpr int elementwise_vector_unroll = 2;

/// A node's V values at indices i … i + V − 1.
template <class T, int V>
struct lanes {
  T at[V];
};

/// The lanes f(0) … f(V − 1).
template <class T, int V, class F>
__device__ __forceinline__ lanes<T, V> each_lane(F&& f) {
  lanes<T, V> out;
#pragma unroll
  for (int k = 0; k < V; ++k) out.at[k] = f(k);
  return out;
}

/// Whether p is on 16 bytes, as a 16-byte access to it needs (null is).
__host__ __device__ inline bool on_16_bytes(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

/// The bytes the accesses to a run of V elements of T take at a time, and so the alignment the
/// run's first element needs: V·sizeof(T), at most 16.
template <class T>
constexpr std::size_t run_access_bytes(int v) {
  const std::size_t bytes = std::size_t(v) * sizeof(T);
  return bytes >= 16 ? 16 : bytes;
}

/// Copies V elements of T from `from` to `to` (registers or memory) in accesses of
/// run_access_bytes; both aligned to it, as the host checked (vector_plan::contiguous).
template <int V, class T>
__device__ __forceinline__ void copy_run(T* to, const T* from) {
  constexpr int bytes = V * int(sizeof(T));
  constexpr int access = int(run_access_bytes<T>(V));
  static_assert(bytes % access == 0 && (access & (access - 1)) == 0, "a run is whole accesses of a power of 2");
#if defined(ATTN_CUDA_EMULATOR)
  // What the GPU would fault on, the emulator reports.
  if (reinterpret_cast<std::uintptr_t>(to) % access != 0 || reinterpret_cast<std::uintptr_t>(from) % access != 0)
    throw cuda_emulator::kernel_error("copy_run: a run's access is not aligned to its width");
  std::memcpy(static_cast<void*>(to), static_cast<const void*>(from), bytes);
#else
  using word = std::conditional_t<
      access == 16, uint4,
      std::conditional_t<access == 8, uint2,
                         std::conditional_t<access == 4, unsigned, std::conditional_t<access == 2, unsigned short,
                                                                                      unsigned char>>>>;
#pragma unroll
  for (int c = 0; c < bytes / access; ++c) reinterpret_cast<word*>(to)[c] = reinterpret_cast<const word*>(from)[c];
#endif
}

/// A plan the vector kernel does not know: the element-at-a-time kernel takes its tree.
template <class Plan>
struct vector_plan {
  static constexpr bool supported = false;
};

template <class T>
struct vector_plan<leaf_plan<T>> {
  using plan = leaf_plan<T>;
  static constexpr bool supported = true;
  static bool contiguous(const plan& p, int v) {
    return reinterpret_cast<std::uintptr_t>(p.data) % run_access_bytes<T>(v) == 0;
  }
  template <int V, class I>
  __device__ static lanes<typename plan::value_type, V> read(const plan& p, I i) {
    alignas(16) T raw[V];
    copy_run<V>(raw, p.data + i);
    return each_lane<typename plan::value_type, V>([&](int k) { return typename plan::value_type(raw[k]); });
  }
};

/// A plan that computes each element from its own index alone (constants, coordinates, dropout's
/// mask): a run is its elements one at a time.
template <class Plan>
struct vector_plan_by_index {
  static constexpr bool supported = true;
  static bool contiguous(const Plan&, int) { return true; }
  template <int V, class I>
  __device__ static lanes<typename Plan::value_type, V> read(const Plan& p, I i) {
    return each_lane<typename Plan::value_type, V>([&](int k) { return p(i + static_cast<I>(k)); });
  }
};
template <class T>
struct vector_plan<constant_plan<T>> : vector_plan_by_index<constant_plan<T>> {};
template <class T>
struct vector_plan<iota_plan<T>> : vector_plan_by_index<iota_plan<T>> {};
template <class C>
struct vector_plan<dropout_mask_plan<C>> : vector_plan_by_index<dropout_mask_plan<C>> {};

template <class Op, class A>
struct vector_plan<unary_plan<Op, A>> {
  using plan = unary_plan<Op, A>;
  static constexpr bool supported = vector_plan<A>::supported;
  static bool contiguous(const plan& p, int v) { return vector_plan<A>::contiguous(p.a, v); }
  template <int V, class I>
  __device__ static lanes<typename plan::value_type, V> read(const plan& p, I i) {
    const auto a = vector_plan<A>::template read<V>(p.a, i);
    return each_lane<typename plan::value_type, V>([&](int k) { return typename plan::value_type(Op{}(a.at[k])); });
  }
};

template <class Op, class A, class B>
struct vector_plan<binary_plan<Op, A, B>> {
  using plan = binary_plan<Op, A, B>;
  static constexpr bool supported = vector_plan<A>::supported && vector_plan<B>::supported;
  static bool contiguous(const plan& p, int v) {
    return vector_plan<A>::contiguous(p.a, v) && vector_plan<B>::contiguous(p.b, v);
  }
  template <int V, class I>
  __device__ static lanes<typename plan::value_type, V> read(const plan& p, I i) {
    const auto a = vector_plan<A>::template read<V>(p.a, i);
    const auto b = vector_plan<B>::template read<V>(p.b, i);
    return each_lane<typename plan::value_type, V>([&](int k) { return Op{}(a.at[k], b.at[k]); });
  }
};

/// Both branches are read for the whole run and each lane takes its own: the loads are whole
/// runs, and a value computed where it is not chosen (a log of a masked 0) is dropped. Floating
/// point alone: an integer division by a masked 0 would trap on the CPU emulator (and give an
/// unspecified value on a GPU), where the element kernel never computes it.
template <class C, class A, class B>
struct vector_plan<select_plan<C, A, B>> {
  using plan = select_plan<C, A, B>;
  static constexpr bool supported = std::is_floating_point_v<typename plan::value_type> &&
                                    vector_plan<C>::supported && vector_plan<A>::supported &&
                                    vector_plan<B>::supported;
  static bool contiguous(const plan& p, int v) {
    return vector_plan<C>::contiguous(p.condition, v) && vector_plan<A>::contiguous(p.a, v) &&
           vector_plan<B>::contiguous(p.b, v);
  }
  template <int V, class I>
  __device__ static lanes<typename plan::value_type, V> read(const plan& p, I i) {
    const auto condition = vector_plan<C>::template read<V>(p.condition, i);
    const auto a = vector_plan<A>::template read<V>(p.a, i);
    const auto b = vector_plan<B>::template read<V>(p.b, i);
    return each_lane<typename plan::value_type, V>([&](int k) { return condition.at[k] ? a.at[k] : b.at[k]; });
  }
};

/// A broadcast or a permute: a run when its innermost dimension (after index_map's merging) is
/// whole runs long and either the operand's innermost too (stride 1, every other stride a
/// multiple of V, so that a run starts at a multiple of V there) or repeated (stride 0: one
/// element of the operand for the whole run).
template <std::size_t R, class A>
struct vector_plan<gather_plan<R, A>> {
  using plan = gather_plan<R, A>;
  static constexpr bool supported = vector_plan<A>::supported;
  static bool contiguous(const plan& p, int v) {
    const index_map<R>& m = p.map;
    if (m.rank == 0 || m.sizes[m.rank - 1] % v != 0) return false;
    const index_t inner = m.inner_stride();
    if (inner == 0) return true;
    if (inner != 1) return false;
    for (int r = 0; r + 1 < m.rank; ++r)
      if (m.strides[r] % v != 0) return false;
    return vector_plan<A>::contiguous(p.a, v);
  }
  template <int V, class I>
  __device__ static lanes<typename plan::value_type, V> read(const plan& p, I i) {
    const I at = p.map(i);
    if (p.map.inner_stride() != 0) return vector_plan<A>::template read<V>(p.a, at);
    const typename plan::value_type value = p.a(at);
    return each_lane<typename plan::value_type, V>([&](int) { return value; });
  }
};

/// A slice: a run when its rows, its operand's rows and its start are whole runs.
template <class A>
struct vector_plan<slice_plan<A>> {
  using plan = slice_plan<A>;
  static constexpr bool supported = vector_plan<A>::supported;
  static bool contiguous(const plan& p, int v) {
    return p.map.block % v == 0 && p.map.source_block % v == 0 && p.map.offset % v == 0 &&
           vector_plan<A>::contiguous(p.a, v);
  }
  template <int V, class I>
  __device__ static lanes<typename plan::value_type, V> read(const plan& p, I i) {
    return vector_plan<A>::template read<V>(p.a, p.map(i));
  }
};

/// Whether a plan of this type into T may run on elementwise_vector_kernel at all: its nodes all
/// known here, and a run wider than one element. The vector kernel is compiled only for those.
template <class Plan, class T>
inline constexpr bool may_take_runs = vector_plan<Plan>::supported && vector_width<T> > 1;

/// Whether `plan` into out[0, n) runs on elementwise_vector_kernel: may_take_runs, n whole runs,
/// out aligned to 16 bytes and every node's runs contiguous.
template <class Plan, class T>
bool runs_in_vectors(const Plan& plan, const T* out, index_t n) {
  if constexpr (!may_take_runs<Plan, T>) {
    return false;
  } else {
    constexpr int v = vector_width<T>;
    return n % v == 0 && on_16_bytes(out) && vector_plan<Plan>::contiguous(plan, v);
  }
}

/// out[i] = plan(i) for every i below runs·V, a run of V at a time in a grid-stride loop of
/// rounds of Unroll runs, each element rounded to T as it is stored; the plan's runs contiguous
/// (runs_in_vectors). The same values as elementwise_kernel's, element for element.
template <class Plan, class T, class Index, int V, int Unroll = elementwise_vector_unroll>
__global__ void __launch_bounds__(256)
    elementwise_vector_kernel(const Plan plan, T* __restrict__ out, const Index runs) {
  using value = lanes<typename Plan::value_type, V>;
  strided_in_rounds<Unroll>(
      static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x, runs,
      static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x),
      [&](Index r) { return vector_plan<Plan>::template read<V>(plan, r * static_cast<Index>(V)); },
      [&](Index r, const value& v) {
        alignas(16) T raw[V];
#pragma unroll
        for (int k = 0; k < V; ++k) raw[k] = static_cast<T>(v.at[k]);
        copy_run<V>(out + r * static_cast<Index>(V), raw);
      });
}

}  // namespace attn::cuda_backend
