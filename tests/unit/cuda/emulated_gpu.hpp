// A device whose kernels are the CUDA backend's, run by the CPU emulator (attn/cuda/emulator.hpp):
// memory<emulated_gpu> is host memory, allocated to the byte (so that AddressSanitizer sees an
// access one past an array) and filled with NaN sentinels (a GPU's fresh memory holds whatever
// was there), and fused_attention<emulated_gpu> is fused_attention<cuda>'s host code
// (fused_attention_launch.cuh) launching its kernels on the emulator. A score modification is
// given in host form, over host memory, and turned into the plans the GPU's kernels take
// (score_modification.cuh), as fused_attention<cuda> turns it (emulated::added_at_each_score
// asks for a variation of that form); a mask rule given as an expression likewise (mask_rule.cuh).
#pragma once

#include <attn/cuda/emulator.hpp>  // first: the kernels below are compiled for it

#include <attn/cuda/fused_attention_launch.cuh>
#include <attn/cuda/mask_rule.cuh>
#include <attn/cuda/score_modification.cuh>

#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

namespace emulated {

struct gpu {};

/// A modification in host form whose device form adds each score's share of the learned inputs'
/// gradients to memory at that score, as the kernels do where the shares cannot be held in
/// registers (device_score_modification::holds_along_keys): a test compares the two ways.
template <class Host>
struct added_at_each_score {
  Host host;
};

template <class M>
struct added_at_each_score_form : M {
  static constexpr bool holds_along_keys = false;
};

/// The device form fused_attention<cuda> makes of host form m; for added_at_each_score, that
/// form adding at each score.
template <class Host>
auto device_form(const Host& m) {
  return attn::cuda_backend::device_modification(m);
}
template <class Host>
auto device_form(const added_at_each_score<Host>& m) {
  const auto held = attn::cuda_backend::device_modification(m.host);
  static_assert(decltype(held)::holds_along_keys, "a form that held its sums, to compare with");
  return added_at_each_score_form<std::remove_const_t<decltype(held)>>{held};
}

}  // namespace emulated

namespace attn {

template <>
struct memory<emulated::gpu> {
  static void* allocate(std::size_t bytes) {
    void* p = std::malloc(bytes > 0 ? bytes : 1);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0xff, bytes);  // NaN, as floats and as 16-bit numbers
    return p;
  }
  static void deallocate(void* p) noexcept { std::free(p); }
  static void copy(void* to, const void* from, std::size_t bytes) {
    if (bytes != 0) std::memcpy(to, from, bytes);
  }
  static void copy_from_host(void* to, const void* from, std::size_t bytes) { copy(to, from, bytes); }
  static void copy_to_host(void* to, const void* from, std::size_t bytes) { copy(to, from, bytes); }
};

template <>
struct fused_attention<emulated::gpu> {
  template <class T, class Rule = every_pair, class Modification = unmodified>
  static void forward(const fused_attention_problem& p, const T* q, const T* k, const T* v, const T* bias, T* out,
                      accumulate_t<T>* log_sum_exp, Rule rule = {}, const Modification& modification = {}) {
    launch::forward(p, q, k, v, bias, out, log_sum_exp, cuda_backend::device_rule(rule),
                    emulated::device_form(modification));
  }

  template <class T, class Rule = every_pair, class Modification = unmodified>
  static void backward(const fused_attention_problem& p, const T* q, const T* k, const T* v, const T* bias,
                       const T* out, const T* d_out, const accumulate_t<T>* log_sum_exp, T* d_q, T* d_k, T* d_v,
                       Rule rule = {}, const Modification& modification = {},
                       accumulate_t<T>* d_modification = nullptr) {
    launch::backward(p, q, k, v, bias, out, d_out, log_sum_exp, d_q, d_k, d_v, cuda_backend::device_rule(rule),
                     emulated::device_form(modification), d_modification);
  }

 private:
  using launch = cuda_backend::fused_attention_launch<cuda_emulator::runtime>;
};

}  // namespace attn
