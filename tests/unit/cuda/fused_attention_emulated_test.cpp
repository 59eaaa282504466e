// The GPU's fused attention kernels (cuda/attn/cuda/fused_attention_kernels.cuh on CUDA cores,
// fused_attention_tensor_cores.cuh on mma.sync), launched by fused_attention<cuda>'s host code on
// the CPU emulator, against the CPU kernel: the cases of tests/gpu/fused_attention_test.cu
// (lengths 1 to 129, head widths 32 to 128, padding, a sentence with no keys, causal and shifted
// masks, a bias, grouped and multi-query heads, dropout, ALiBi and a soft cap with learned
// inputs, bands of keys) in float, double, bfloat16 and float16, the 16-bit ones on CUDA cores and on tensor
// cores. What this shows and what it cannot: attn/cuda/emulator.hpp's header.
#include "emulated_gpu.hpp"

#include <attn/cpu.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../../gpu/fused_attention_case.hpp"

namespace {

using attn::index_t;
using fused_case::modification;

/// ALiBi (s − m_h·|first_query + i − j|) or a soft cap (c_h·tanh(s / c_h)) with a learned number a
/// head, in both forms the kernels take: the CPU kernel's, by a score's coordinates {b, h, i, j},
/// and the GPU kernels' device form (score_modification.cuh's), by its row-major index in
/// [batch, heads, queries, keys].
template <class A>
struct learned_modification {
  static constexpr bool modifies = true;
  modification kind;
  const A* learned;  // [heads]
  index_t heads, queries, keys, first_query;
  index_t size;  // numbers of the learned inputs' gradient

  using coordinates = std::array<index_t, 4>;

  A operator()(const coordinates& c, A s) const {
    const A m = learned[c[1]];
    return kind == modification::alibi ? s - m * distance(c) : m * std::tanh(s / m);
  }
  A derivative(const coordinates& c, A s) const {
    if (kind == modification::alibi) return A(1);
    const A t = std::tanh(s / learned[c[1]]);
    return A(1) - t * t;
  }
  index_t gradient_size() const { return size; }
  void accumulate(const coordinates& c, A s, A d_score, A* gradients) const {
    const A m = learned[c[1]];
    if (kind == modification::alibi) {
      gradients[c[1]] -= d_score * distance(c);
    } else {
      const A t = std::tanh(s / m);
      gradients[c[1]] += d_score * (t - s / m * (A(1) - t * t));
    }
  }

  // The device form.
  template <class S>
  S operator()(std::int64_t at, S s) const {
    return S((*this)(coordinates_of(at), A(s)));
  }
  template <class S>
  S derivative(std::int64_t at, S s) const {
    return S(derivative(coordinates_of(at), A(s)));
  }
  template <class S>
  void accumulate(std::int64_t at, S s, S d_score, S* gradients) const {
    accumulate(coordinates_of(at), A(s), A(d_score), gradients);
  }

 private:
  A distance(const coordinates& c) const { return std::abs(A(first_query + c[2] - c[3])); }
  coordinates coordinates_of(std::int64_t at) const {
    const index_t j = index_t(at % keys);
    at /= keys;
    const index_t i = index_t(at % queries);
    at /= queries;
    return {index_t(at / heads), index_t(at % heads), i, j};
  }
};

struct make_learned {
  template <class A>
  learned_modification<A> operator()(const A* learned, const fused_case::sizes& z) const {
    return {z.modified, learned, z.heads, z.queries, z.keys, z.first_query, z.heads};
  }
};

template <class T, class Device>
fused_case::result run_case(const fused_case::sizes& z, unsigned seed) {
  if (z.modified == modification::none) return fused_case::run_kernel<T, Device>(z, seed);
  return fused_case::run_kernel<T, Device>(z, seed, make_learned{});
}

/// Whether 16-bit calls run on tensor cores, until the end of the scope.
struct tensor_cores_set {
  bool before = attn::cuda_backend::fused_attention_tensor_cores::enabled();
  explicit tensor_cores_set(bool on) { attn::cuda_backend::fused_attention_tensor_cores::enabled() = on; }
  ~tensor_cores_set() { attn::cuda_backend::fused_attention_tensor_cores::enabled() = before; }
};

#if defined(__SANITIZE_ADDRESS__)
constexpr index_t longest = 200;  // under the sanitizers (at -O0): the lengths up to 129
// and float16 alone of the 16-bit types: bfloat16 runs the same kernels' indexing, and the two
// took half of the sanitized test's time.
#define ATTN_EMULATED_BFLOAT16 0
#else
constexpr index_t longest = 1000;
#define ATTN_EMULATED_BFLOAT16 1
#endif

/// Every case of fused_attention_test.cu but those of 1000 queries on tensor cores (a minute
/// each on the emulator, every mma a collective of 32 fibers; the CUDA-core kernels take them
/// but under the sanitizers).
template <class T>
void compare(double tolerance, bool tensor_cores) {
  const tensor_cores_set setting(tensor_cores);
  unsigned seed = 1;
  int compared = 0;
  for (const auto& z : fused_case::cases()) {
    ++seed;
    if ((tensor_cores && z.queries >= 1000) || z.queries > longest) continue;
    const auto want = run_case<T, attn::cpu>(z, seed);
    const auto got = run_case<T, emulated::gpu>(z, seed);
    const char* parts[] = {"out", "d_q", "d_k", "d_v", "d_modification"};
    using part = std::vector<double> fused_case::result::*;
    const part members[] = {&fused_case::result::out, &fused_case::result::d_q, &fused_case::result::d_k,
                            &fused_case::result::d_v, &fused_case::result::d_modification};
    for (int m = 0; m < 5; ++m) {
      INFO(z.str(), " ", std::string(parts[m]));
      // As the GPU test: a learned input's gradient sums a head's every score, terms that largely
      // cancel, so ten times the others' tolerance.
      CHECK(fused_case::relative(got.*members[m], want.*members[m]) < (m == 4 ? 10 * tolerance : tolerance));
    }
    ++compared;
  }
  CHECK(compared > 10);
}

}  // namespace

// The tolerances of tests/gpu/fused_attention_test.cu, which says why.
TEST_CASE("fused attention's GPU kernels on the emulator: float and double on CUDA cores") {
  compare<float>(1e-5, false);
  compare<double>(1e-12, false);
}

TEST_CASE("fused attention's GPU kernels on the emulator: bfloat16 and float16 on CUDA cores") {
#if ATTN_EMULATED_BFLOAT16
  compare<attn::bfloat16>(std::ldexp(1.0, -8), false);
#endif
  compare<attn::float16>(std::ldexp(1.0, -11), false);
}

TEST_CASE("fused attention's GPU kernels on the emulator: bfloat16 and float16 on tensor cores") {
#if ATTN_EMULATED_BFLOAT16
  compare<attn::bfloat16>(std::ldexp(1.0, -7), true);
#endif
  compare<attn::float16>(std::ldexp(1.0, -10), true);
}

TEST_CASE("fused attention's GPU kernels on the emulator: float16 on tensor cores, async copies landing early") {
  // Each copy lands at the first barrier after its issue too, the other end of when a GPU may
  // land it: a tile copied into a buffer whose rows the block stages and reads before the
  // copy's wait overwrites them here.
  struct early_landing {
    early_landing() { attn::cuda_emulator::async_copies_land_early() = true; }
    ~early_landing() { attn::cuda_emulator::async_copies_land_early() = false; }
  } early;
  compare<attn::float16>(std::ldexp(1.0, -10), true);
}

TEST_CASE("fused attention's tensor-core key walk puts its first tile in the first buffer, wherever it starts") {
  // The second buffer holds the block's own queries (and output gradients) until the first
  // tile is waited for: a walk that starts at an odd tile (a band's) must not copy into it.
  namespace tensor_cores = attn::cuda_backend::fused_attention_tensor_cores;
  using tiles = tensor_cores::key_value_tiles<64, attn::bfloat16>;
  std::vector<std::uint16_t> buffers(4 * tiles::tile);  // [2][keys, values][tile]
  std::uint16_t* const staged = buffers.data();
  for (const index_t begin : {0, 64, 192}) {
    const tiles walk{staged, nullptr, nullptr, begin, begin + 4 * 64, 64, 64, true, true};
    CHECK(walk.keys_of(begin) == staged);
    CHECK(walk.keys_of(begin + 64) == staged + 2 * tiles::tile);
    CHECK(walk.keys_of(begin + 128) == staged);
  }
}

TEST_CASE("fused attention's GPU kernels on the emulator: a modified call with no queries") {
  // No query rows: nothing to launch, and the learned inputs' gradients are 0 (the scratch a
  // sentence's rows take is then 0 bytes, which sized the dQ launches by a division).
  for (const bool tensor_cores : {false, true}) {
    const tensor_cores_set setting(tensor_cores);
    fused_case::sizes z{.batch = 2, .heads = 2, .kv_heads = 2, .queries = 0, .keys = 5, .d_k = 32, .d_v = 32,
                        .modified = modification::alibi};
    const auto got = run_case<attn::bfloat16, emulated::gpu>(z, 3);
    const auto want = run_case<attn::bfloat16, attn::cpu>(z, 3);
    CHECK(got.d_modification == std::vector<double>{0, 0});
    CHECK(want.d_modification == got.d_modification);
    CHECK(got.d_k == want.d_k);
  }
}
