// The plans of the nodes that read their operands at a row-major linear index (leaves, coordinates,
// dropout's mask, broadcasts and permutes, slices): the generated elementwise kernel's
// (elementwise.cuh builds them from expressions). No CUDA run-time here: the CPU emulator's tests
// build and run them too (tests/unit/cuda/elementwise_emulated_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <attn/core.hpp>
#include <attn/expr/dropout_mask.hpp>

#include "index_map.cuh"

namespace attn::cuda_backend {

/// A leaf: dense row-major data, read at the node's own index. Also the form of a reduction
/// or contraction evaluated into a temporary.
template <class T>
struct leaf_plan {
  using value_type = accumulate_t<T>;
  const T* data;
  template <class I, class... Given>
  __device__ value_type operator()(I i, Given...) const { return value_type(data[i]); }
};

/// An iota: the node's own index, shifted.
template <class T>
struct iota_plan {
  using value_type = T;
  T start;
  template <class I, class... Given>
  __device__ T operator()(I i, Given...) const { return start + static_cast<T>(i); }
};

/// Dropout's mask: the stream's number at the node's own index (expr/dropout_mask.hpp).
template <class C>
struct dropout_mask_plan {
  using value_type = C;
  dropout_draws<C> draws;
  template <class I, class... Given>
  __device__ C operator()(I i, Given...) const { return draws(static_cast<std::uint64_t>(i)); }
};

/// Broadcast and permute: the operand read through an index_map.
template <std::size_t R, class A>
struct gather_plan {
  using value_type = typename A::value_type;
  A a;
  index_map<R> map;
  template <class I, class... Given>
  __device__ value_type operator()(I i, Given... given) const { return a(map(i), given...); }
};

template <class A>
struct slice_plan {
  using value_type = typename A::value_type;
  A a;
  slice_map map;
  template <class I, class... Given>
  __device__ value_type operator()(I i, Given... given) const { return a(map(i), given...); }
};

}  // namespace attn::cuda_backend
