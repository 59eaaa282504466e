// The GPU's fused attention kernels (cuda/attn/cuda/fused_attention_kernels.cuh on CUDA cores,
// fused_attention_tensor_cores.cuh on mma.sync), launched by fused_attention<cuda>'s host code on
// the CPU emulator, against the CPU kernel: the cases of tests/gpu/fused_attention_test.cu
// (lengths 1 to 129, head widths 32 to 128, padding, a sentence with no keys, causal and shifted
// masks, a bias, grouped and multi-query heads, dropout, ALiBi and a soft cap with learned
// inputs, bands of keys, bands as expressions in float and bfloat16, and short sentences several
// a tensor-core block) in float, double, bfloat16 and float16, the 16-bit ones on CUDA cores and
// on tensor cores. What this shows and
// what it cannot: attn/cuda/emulator.hpp's header.
#include "emulated_gpu.hpp"

#include <attn/cpu.hpp>
#include <attn/grad/fused_attention.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../../gpu/fused_attention_case.hpp"

namespace {

using attn::index_t;
using fused_case::modification;

using B = attn::dim<"batch">;
using H = attn::dim<"heads">;
using Q = attn::dim<"queries">;
using K = attn::dim<"keys">;

/// ALiBi (s − m_h·|first_query + i − j|) or a soft cap (c_h·tanh(s / c_h)) with a learned number a
/// head, the expressions of fused_attention_case.hpp's grad cases over the case's numbers (host
/// memory, the emulator's too): the CPU kernel takes its host form (element_at), the emulated GPU
/// kernels its device form (score_modification.cuh's coordinate plans), as on a GPU.
template <modification kind>
struct make_learned {
  template <class A>
  auto operator()(const A* learned, const fused_case::sizes& z) const {
    using S = attn::shape<B, H, Q, K>;
    const attn::extents<S> scores(z.batch, z.heads, z.queries, z.keys);
    const attn::tensor_view<const A, attn::shape<H>, attn::cpu> x(learned, attn::extents<attn::shape<H>>(z.heads));
    const auto alibi = [first = A(z.first_query)](const auto& s, const auto& slopes) {
      return s - attn::broadcast_like(slopes, s) * attn::abs(attn::index_along<Q>(s, first) - attn::index_along<K>(s));
    };
    const auto soft_cap = [](const auto& s, const auto& cap) {
      return attn::broadcast_like(cap, s) * attn::tanh(s / attn::broadcast_like(cap, s));
    };
    if constexpr (kind == modification::alibi)
      return attn::grad::detail::evaluate_modification_of<A, S, attn::cpu>(alibi, scores, {true}, x);
    else
      return attn::grad::detail::evaluate_modification_of<A, S, attn::cpu>(soft_cap, scores, {true}, x);
  }
};

template <class T, class Device>
fused_case::result run_case(const fused_case::sizes& z, unsigned seed) {
  switch (z.modified) {
    case modification::alibi: return fused_case::run_kernel<T, Device>(z, seed, make_learned<modification::alibi>{});
    case modification::soft_cap:
      return fused_case::run_kernel<T, Device>(z, seed, make_learned<modification::soft_cap>{});
    case modification::none: break;
  }
  return fused_case::run_kernel<T, Device>(z, seed);
}

/// Whether 16-bit calls run on tensor cores, and whether those pack short sentences into blocks,
/// until the end of the scope.
using tensor_cores_set = fused_case::set_while<attn::cuda_backend::fused_attention_tensor_cores::enabled>;
using packing_set = fused_case::set_while<attn::cuda_backend::fused_attention_tensor_cores::packs_sentences>;

#if defined(ATTN_EMULATOR_ASAN) || defined(ATTN_EMULATOR_TSAN)
constexpr index_t longest = 200;  // under the sanitizers (at -O0): the lengths up to 129
// and float16 alone of the 16-bit types: bfloat16 runs the same kernels' indexing, and the two
// took half of the sanitized test's time.
#define ATTN_EMULATED_BFLOAT16 0
constexpr bool sanitized = true;
#else
constexpr index_t longest = 1000;
#define ATTN_EMULATED_BFLOAT16 1
constexpr bool sanitized = false;
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
    if ((tensor_cores && z.queries >= 1000) || z.queries > longest || !fused_case::runs<T>(z)) continue;
    auto split = z;  // the CPU's numbers with the heads apart: the GPU's heads in rows against them
    split.heads_in_rows = false;
    const auto want = run_case<T, attn::cpu>(split, seed);
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

// The cases above took the dK/dV kernel's dQ sums (atomics); these take the dQ kernel too: its
// dQ (and the learned inputs' gradients) against the CPU's, the same dK, dV and output bits as
// the sums' (the same code computes them) and dQ's bits different somewhere (the switch
// switches). The cases up to 129 queries, in float16: bfloat16 runs the same kernels'
// indexing. Not under the sanitizers, for the time.
TEST_CASE("fused attention's GPU kernels on the emulator: float16 on tensor cores, the deterministic backward" *
          doctest::skip(sanitized)) {
  using T = attn::float16;
  const tensor_cores_set setting(true);
  unsigned seed = 1;
  int compared = 0, dq_differs = 0;
  for (const auto& z : fused_case::cases()) {
    ++seed;
    if (z.queries > 129 || !fused_case::runs<T>(z)) continue;
    const auto summed = run_case<T, emulated::gpu>(z, seed);
    const fused_case::deterministic_while exact(true);
    const auto separate = run_case<T, emulated::gpu>(z, seed);
    auto split = z;  // the CPU's numbers with the heads apart: the GPU's heads in rows against them
    split.heads_in_rows = false;
    const auto want = run_case<T, attn::cpu>(split, seed);
    INFO(z.str());
    CHECK(fused_case::relative(separate.d_q, want.d_q) < std::ldexp(1.0, -10));
    CHECK(fused_case::relative(separate.d_modification, want.d_modification) < 10 * std::ldexp(1.0, -10));
    CHECK(summed.out == separate.out);
    CHECK(summed.d_k == separate.d_k);
    CHECK(summed.d_v == separate.d_v);
    dq_differs += summed.d_q != separate.d_q;
    ++compared;
  }
  CHECK(compared > 10);
  CHECK(dq_differs > 0);
}

// Not under the sanitizers: the copies read and write the same addresses whenever they land, so
// AddressSanitizer sees what the case above shows it, and the case took 76 of the sanitized
// run's seconds (docs/testing.md); the unsanitized build runs it. ThreadSanitizer would not see
// the early landings (the emulator's bookkeeping, hidden from it) either.
TEST_CASE("fused attention's GPU kernels on the emulator: float16 on tensor cores, async copies landing early" *
          doctest::skip(sanitized)) {
  // Each copy lands at the first barrier after its issue too, the other end of when a GPU may
  // land it: a tile copied into a buffer whose rows the block stages and reads before the
  // copy's wait overwrites them here.
  const fused_case::set_while<attn::cuda_emulator::async_copies_land_early> early(true);
  compare<attn::float16>(std::ldexp(1.0, -10), true);
}

/// Case z on the emulated GPU, a block's threads taking their turns last to first when
/// `reverse`, first to last otherwise (whatever ATTN_EMULATOR_THREADS_IN_REVERSE says).
template <class T>
fused_case::result run_in_order(const fused_case::sizes& z, unsigned seed, bool reverse) {
  const attn::cuda_emulator::threads_in_reverse_while order(reverse);
  return run_case<T, emulated::gpu>(z, seed);
}

/// Runs every case but the 1000-query ones on the emulated GPU twice, a block's threads taking
/// their turns first to last and then last to first (emulator.hpp: a race over shared memory
/// reads another thread's number in one order and the old one in the other), and asks for the
/// same bits.
template <class T>
void same_bits_in_either_order(bool tensor_cores) {
  const tensor_cores_set setting(tensor_cores);
  unsigned seed = 1;
  int compared = 0;
  for (const auto& z : fused_case::cases()) {
    ++seed;
    if (z.queries >= 1000 || !fused_case::runs<T>(z)) continue;
    const auto in_order = run_in_order<T>(z, seed, false);
    const auto reversed = run_in_order<T>(z, seed, true);
    INFO(z.str());
    CHECK(reversed.out == in_order.out);
    CHECK(reversed.d_q == in_order.d_q);
    CHECK(reversed.d_k == in_order.d_k);
    CHECK(reversed.d_v == in_order.d_v);
    CHECK(reversed.d_modification == in_order.d_modification);
    ++compared;
  }
  CHECK(compared > 10);
}

// Not under the sanitizers, for the time (as the case above): the unsanitized build runs them.
TEST_CASE("fused attention's GPU kernels on the emulator: float on CUDA cores, the same bits whichever order a "
          "block's threads take" * doctest::skip(sanitized)) {
  same_bits_in_either_order<float>(false);
}

TEST_CASE("fused attention's GPU kernels on the emulator: float16 on tensor cores, the same bits whichever order a "
          "block's threads take" * doctest::skip(sanitized)) {
  same_bits_in_either_order<attn::float16>(true);
}

/// make_learned's modification, whose device form adds each score's share of the learned inputs'
/// gradients to memory at the score.
template <modification kind>
struct make_added_at_each_score {
  template <class A>
  auto operator()(const A* learned, const fused_case::sizes& z) const {
    const auto host = make_learned<kind>{}(learned, z);
    return emulated::added_at_each_score<decltype(host)>{host};
  }
};

/// The modified cases with learned inputs up to 129 queries, with the learned inputs' gradient
/// shares held in registers (ALiBi's slopes and the soft cap's caps are a number a head: every
/// share of a query row goes to the same number) and added to memory at each score: the same bits.
template <class T>
void same_bits_held_or_added(bool tensor_cores) {
  const tensor_cores_set setting(tensor_cores);
  unsigned seed = 1;
  int compared = 0;
  for (const auto& z : fused_case::cases()) {
    ++seed;
    if (z.queries > 129 || z.modified == modification::none || !z.learns || !fused_case::runs<T>(z)) continue;
    using fused_case::run_kernel;
    const auto held = run_case<T, emulated::gpu>(z, seed);
    const auto added = z.modified == modification::alibi
                           ? run_kernel<T, emulated::gpu>(z, seed, make_added_at_each_score<modification::alibi>{})
                           : run_kernel<T, emulated::gpu>(z, seed, make_added_at_each_score<modification::soft_cap>{});
    INFO(z.str());
    CHECK(!held.d_modification.empty());
    CHECK(held.d_modification == added.d_modification);
    CHECK(held.d_q == added.d_q);
    CHECK(held.d_k == added.d_k);
    CHECK(held.out == added.out);
    ++compared;
  }
  CHECK(compared >= 3);
}

TEST_CASE("fused attention's GPU kernels on the emulator: the learned inputs' gradients held in registers or added "
          "at each score, the same bits") {
  same_bits_held_or_added<float>(false);
  same_bits_held_or_added<attn::float16>(true);
}

TEST_CASE("fused attention's tensor-core key walk puts its first tile in the first buffer, wherever it starts") {
  // The second buffer holds the block's own queries (and output gradients) until the first
  // tile is waited for: a walk that starts at an odd tile (a band's) must not copy into it.
  namespace tensor_cores = attn::cuda_backend::fused_attention_tensor_cores;
  using tiles = tensor_cores::key_value_tiles<64, attn::bfloat16>;
  std::vector<std::uint16_t> buffers(4 * tiles::tile);  // [2][keys, values][tile]
  std::uint16_t* const staged = buffers.data();
  for (const index_t begin : {0, 64, 192}) {
    const tiles walk{staged, nullptr, nullptr, begin, begin + 4 * 64, 64, 64, 64, 64, true, true};
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

TEST_CASE("fused attention's GPU kernels on the emulator: a row whose every score is -inf has no gradient") {
  // Query 0's products overflow float (1e20 · −1e20): it sees nothing, its log-sum-exp is −∞,
  // its output 0. Every kernel must then give it, and the keys, finite gradients: no 0 · ∞.
  using T = attn::bfloat16;
  const index_t queries = 128, keys = 128, d = 64;
  std::vector<T> q(queries * d, T(0.f)), k(keys * d, T(0.f)), v(keys * d), d_out(queries * d);
  for (index_t x = 0; x < queries * d; ++x) d_out[x] = T(float(x * 37 % 11 - 5) / 7);
  for (index_t x = 0; x < keys * d; ++x) v[x] = T(float(x * 13 % 7 - 3) / 5);
  for (index_t i = 0; i < queries; ++i) q[i * d + 1] = T(0.1f * float(i % 5));
  for (index_t j = 0; j < keys; ++j) k[j * d] = T(-1e20f), k[j * d + 1] = T(float(j % 3));
  for (const bool causal : {false, true}) {
    const index_t row = causal ? 127 : 0;  // causal: a row with unmasked tiles before its diagonal
    std::vector<T> q_row = q;
    q_row[row * d] = T(1e20f);
    attn::fused_attention_problem p;
    p.queries = queries, p.keys = keys, p.d_k = d, p.d_v = d, p.scale = 0.125, p.causal = causal;
    for (const bool tensor_cores : {false, true}) {
      const tensor_cores_set setting(tensor_cores);
      std::vector<T> out(queries * d), d_q(queries * d), d_k(keys * d), d_v(keys * d);
      std::vector<float> log_sum_exp(queries);
      attn::fused_attention<emulated::gpu>::forward(p, q_row.data(), k.data(), v.data(), static_cast<const T*>(nullptr),
                                                    out.data(), log_sum_exp.data());
      attn::fused_attention<emulated::gpu>::backward(p, q_row.data(), k.data(), v.data(), static_cast<const T*>(nullptr),
                                                     out.data(), d_out.data(), log_sum_exp.data(), d_q.data(),
                                                     d_k.data(), d_v.data());
      const auto finite = [](const std::vector<T>& x) {
        int count = 0;
        for (const T y : x) count += std::isfinite(float(y));
        return count;
      };
      INFO("causal " << causal << ", tensor cores " << tensor_cores);
      CHECK(log_sum_exp[row] == -INFINITY);
      CHECK(finite(out) == queries * d);
      CHECK(finite(d_q) == queries * d);
      CHECK(finite(d_k) == keys * d);
      CHECK(finite(d_v) == keys * d);

      // The same under s + x·s with x learned: inlined in the tensor-core kernels, which take its
      // derivative at every unmasked score without a branch. The row's partial by x is its score,
      // −∞, and 0 · −∞ is NaN: its shares must not be counted at all. Its output gradient is
      // made to overflow dP = dO·v against key 0, so that its dS, 0 · ∞, is NaN too: the row
      // must not count for having seen nothing, whatever its dS is. (The unmodified tensor-core
      // kernels, above, take such a row's probabilities as 0 without a check.)
      std::vector<T> d_out_row = d_out;
      for (index_t c = 0; c < d; ++c) d_out_row[row * d + c] = T(float(v[c]) < 0 ? -3e38f : 3e38f);
      const float x_value = 0.5f;
      const attn::extents<attn::shape<B, H, Q, K>> scores(1, 1, queries, keys);
      const attn::tensor_view<const float, attn::shape<H>, attn::cpu> x(&x_value, attn::extents<attn::shape<H>>(1));
      const auto scaled_by_x = [](const auto& s, const auto& x) { return s + attn::broadcast_like(x, s) * s; };
      const auto modification =
          attn::grad::detail::evaluate_modification_of<float, attn::shape<B, H, Q, K>, attn::cpu>(scaled_by_x, scores,
                                                                                                 {true}, x);
      static_assert(attn::cuda_backend::fused_attention_tensor_cores::inlines<
                        decltype(attn::cuda_backend::device_modification(modification))>,
                    "a modification the tensor-core kernels inline");
      float d_x = NAN;
      attn::fused_attention<emulated::gpu>::forward(p, q_row.data(), k.data(), v.data(), static_cast<const T*>(nullptr),
                                                    out.data(), log_sum_exp.data(), attn::every_pair{}, modification);
      attn::fused_attention<emulated::gpu>::backward(p, q_row.data(), k.data(), v.data(), static_cast<const T*>(nullptr),
                                                     out.data(), d_out_row.data(), log_sum_exp.data(), d_q.data(),
                                                     d_k.data(), d_v.data(), attn::every_pair{}, modification, &d_x);
      CHECK(log_sum_exp[row] == -INFINITY);
      CHECK(finite(out) == queries * d);
      CHECK(finite(d_q) == queries * d);
      CHECK(finite(d_k) == keys * d);
      CHECK(finite(d_v) == keys * d);
      CHECK(std::isfinite(d_x));
    }
  }
}

TEST_CASE("fused attention's GPU kernels on the emulator: no derivative of a modification where dS is 0") {
  // s + x·s² with x = −0.5 learned, inlined in the tensor-core kernels. Query 5's scores against
  // the odd keys are −1.25e20: x·s² overflows, its modified score is −∞ and its probability 0,
  // so dS is 0 there; the partial by x, s², is +∞. As the CPU, such a pair gives no derivative
  // and no share: counted, 0 · ∞ would make x's gradient NaN. The row sees the even keys.
  using T = attn::bfloat16;
  const index_t queries = 128, keys = 128, d = 64, row = 5;
  std::vector<T> q(queries * d, T(0.f)), k(keys * d, T(0.f)), v(keys * d), d_out(queries * d);
  for (index_t x = 0; x < queries * d; ++x) d_out[x] = T(float(x * 37 % 11 - 5) / 7);
  for (index_t x = 0; x < keys * d; ++x) v[x] = T(float(x * 13 % 7 - 3) / 5);
  for (index_t i = 0; i < queries; ++i) q[i * d + 1] = T(0.1f * float(i % 5));
  for (index_t j = 0; j < keys; ++j) k[j * d] = T(j % 2 ? -1e11f : 0.f), k[j * d + 1] = T(float(j % 3));
  q[row * d] = T(1e10f);
  attn::fused_attention_problem p;
  p.queries = queries, p.keys = keys, p.d_k = d, p.d_v = d, p.scale = 0.125;
  const float x_value = -0.5f;
  const attn::extents<attn::shape<B, H, Q, K>> scores(1, 1, queries, keys);
  const attn::tensor_view<const float, attn::shape<H>, attn::cpu> x(&x_value, attn::extents<attn::shape<H>>(1));
  const auto squared = [](const auto& s, const auto& x) { return s + attn::broadcast_like(x, s) * s * s; };
  const auto modification =
      attn::grad::detail::evaluate_modification_of<float, attn::shape<B, H, Q, K>, attn::cpu>(squared, scores, {true},
                                                                                             x);
  static_assert(attn::cuda_backend::fused_attention_tensor_cores::inlines<
                    decltype(attn::cuda_backend::device_modification(modification))>,
                "a modification the tensor-core kernels inline");
  float d_x[2] = {NAN, NAN};
  for (const bool tensor_cores : {false, true}) {
    const tensor_cores_set setting(tensor_cores);
    std::vector<T> out(queries * d), d_q(queries * d), d_k(keys * d), d_v(keys * d);
    std::vector<float> log_sum_exp(queries);
    attn::fused_attention<emulated::gpu>::forward(p, q.data(), k.data(), v.data(), static_cast<const T*>(nullptr),
                                                  out.data(), log_sum_exp.data(), attn::every_pair{}, modification);
    attn::fused_attention<emulated::gpu>::backward(p, q.data(), k.data(), v.data(), static_cast<const T*>(nullptr),
                                                   out.data(), d_out.data(), log_sum_exp.data(), d_q.data(),
                                                   d_k.data(), d_v.data(), attn::every_pair{}, modification,
                                                   &d_x[tensor_cores]);
    INFO("tensor cores " << tensor_cores);
    CHECK(std::isfinite(log_sum_exp[row]));
    for (const auto* part : {&d_q, &d_k, &d_v}) {
      int finite = 0;
      for (const T y : *part) finite += std::isfinite(float(y));
      CHECK(finite == index_t(part->size()));
    }
    CHECK(std::isfinite(d_x[tensor_cores]));
  }
  // The two kinds of kernel agree on x's gradient (bfloat16's tolerance, ten times for a sum of
  // every score's share, as the cases above).
  CHECK(std::abs(d_x[1] - d_x[0]) <= 10 * std::ldexp(1.0, -7) * std::abs(d_x[0]));
}

TEST_CASE("fused attention's GPU launches refuse more sentences or heads than a grid holds, with a clear error") {
  // A block a (tile, head, sentence): a GPU's grid has at most 65 535 blocks along y and z.
  using T = attn::bfloat16;
  attn::fused_attention_problem p;
  p.batch = 65536, p.heads = 1, p.kv_heads = 1, p.queries = 1, p.keys = 1, p.d_k = 32, p.d_v = 32, p.scale = 1;
  std::vector<T> x(std::size_t(p.batch) * 32), out(x.size());
  std::vector<float> log_sum_exp(std::size_t(p.batch));
  for (const bool tensor_cores : {false, true}) {
    const tensor_cores_set setting(tensor_cores);
    CHECK_THROWS_WITH_AS(attn::fused_attention<emulated::gpu>::forward(p, x.data(), x.data(), x.data(),
                                                                        static_cast<const T*>(nullptr), out.data(),
                                                                        log_sum_exp.data()),
                         doctest::Contains("65536 sentences"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(attn::fused_attention<emulated::gpu>::backward(
                             p, x.data(), x.data(), x.data(), static_cast<const T*>(nullptr), out.data(), x.data(),
                             log_sum_exp.data(), out.data(), out.data(), out.data()),
                         doctest::Contains("split the batch"), std::invalid_argument);
  }
}

TEST_CASE("fused attention's GPU launches leave a head whose rows span 2^31 elements to the CUDA-core kernels") {
  // The tensor-core kernels address a head's rows in 32 bits; the CUDA-core ones in 64.
  using launch = attn::cuda_backend::fused_attention_launch<attn::cuda_emulator::runtime>;
  attn::fused_attention_problem p;
  p.batch = 1, p.heads = 16, p.kv_heads = 16, p.d_k = 128, p.d_v = 128, p.scale = 1, p.heads_in_rows = true;
  p.queries = p.keys = (index_t{1} << 20) - 1;  // rows 2048 elements apart: just under 2³¹
  CHECK(launch::tensor_cores_address(p.laid_out()));
  p.queries = index_t{1} << 20;
  CHECK_FALSE(launch::tensor_cores_address(p.laid_out()));
  p.heads_in_rows = false;  // the same heads apart: rows 128 elements apart
  CHECK(launch::tensor_cores_address(p.laid_out()));
  p.keys = index_t{1} << 24;
  CHECK_FALSE(launch::tensor_cores_address(p.laid_out()));
  p.keys = (index_t{1} << 24) - 1;
  p.d_v = 129;  // the values' rows wider than the keys'
  CHECK_FALSE(launch::tensor_cores_address(p.laid_out()));
}

TEST_CASE("fused attention's GPU launches pack short sentences in rows, as many as a tile holds, into a block") {
  using launch = attn::cuda_backend::fused_attention_launch<attn::cuda_emulator::runtime>;
  attn::fused_attention_problem p;
  p.batch = 100, p.heads = 8, p.kv_heads = 8, p.d_k = 64, p.d_v = 64, p.scale = 1, p.heads_in_rows = true;
  p.queries = p.keys = 10;
  CHECK(launch::sentences_a_block(p) == 6);
  p.keys = 13;  // the longer side decides: four sentences' 52 keys
  CHECK(launch::sentences_a_block(p) == 4);
  p.queries = p.keys = 32;
  CHECK(launch::sentences_a_block(p) == 2);
  p.queries = 33;  // one sentence's queries take the tile
  CHECK(launch::sentences_a_block(p) == 1);
  p.queries = p.keys = 1;
  CHECK(launch::sentences_a_block(p) == 64);
  p.batch = 5;  // no more than the batch
  CHECK(launch::sentences_a_block(p) == 5);
  p.heads_in_rows = false;  // heads apart: a head's rows of two sentences are not one stride apart
  CHECK(launch::sentences_a_block(p) == 1);
  p.heads_in_rows = true;
  p.queries = 0;  // the keys decide
  CHECK(launch::sentences_a_block(p) == 5);
  p.keys = 0;
  CHECK(launch::sentences_a_block(p) == 1);
  p.queries = p.keys = 10;
  const packing_set off(false);  // ATTN_FUSED_PACKING=0
  CHECK(launch::sentences_a_block(p) == 1);
}

// The cases of fused_case::cases() that tensor cores take packed (the cases above compare them
// with the CPU), packed and one sentence a block: the same sums of the same products, in another
// order (a row's keys at other columns of the tile), so within float16's rounding.
TEST_CASE(
    "fused attention's GPU kernels on the emulator: float16 on tensor cores, short sentences packed or one a block") {
  using T = attn::float16;
  const tensor_cores_set setting(true);
  unsigned seed = 1;
  int compared = 0;
  for (const auto& z : fused_case::cases()) {
    ++seed;
    if (!z.heads_in_rows || std::max(z.queries, z.keys) > 32 || !fused_case::runs<T>(z)) continue;
    fused_case::result packed, apart;
    {
      const packing_set on(true);
      packed = run_case<T, emulated::gpu>(z, seed);
    }
    {
      const packing_set off(false);
      apart = run_case<T, emulated::gpu>(z, seed);
    }
    INFO(z.str());
    using part = std::vector<double> fused_case::result::*;
    for (const part m : {&fused_case::result::out, &fused_case::result::d_q, &fused_case::result::d_k,
                         &fused_case::result::d_v, &fused_case::result::d_modification})
      CHECK(fused_case::relative(packed.*m, apart.*m) < std::ldexp(1.0, -10));
    ++compared;
  }
  CHECK(compared == 12);
}

TEST_CASE("fused attention's GPU backward refuses 2^32 query tiles for one key head, which dK/dV counts in 32 bits") {
  // 65 535 query heads on one key head: 65 537 tiles of 64 queries make 2³² − 1 steps, the most;
  // 65 538 tiles (the last of one query) are refused, by the backward before anything is read.
  using launch = attn::cuda_backend::fused_attention_launch<attn::cuda_emulator::runtime>;
  attn::fused_attention_problem p;
  p.batch = 1, p.heads = 65535, p.kv_heads = 1, p.keys = 1, p.d_k = 32, p.d_v = 32, p.scale = 1;
  p.queries = 65537 * 64;
  CHECK_NOTHROW(launch::check_query_tiles(p, "test"));
  p.queries = 65537 * 64 + 1;
  CHECK_THROWS_WITH_AS(launch::check_query_tiles(p, "test"),
                       "test: 65535 query heads a key head, 4194369 queries: 2^32 or more tiles of 64 queries for "
                       "one key head",
                       std::invalid_argument);
  p.kv_heads = 5;  // groups of 13 107: far from it
  CHECK_NOTHROW(launch::check_query_tiles(p, "test"));

  using T = attn::bfloat16;
  p.kv_heads = 1;
  std::vector<T> x(32);
  std::vector<float> log_sum_exp(1);
  CHECK_THROWS_WITH_AS(attn::fused_attention<emulated::gpu>::backward(
                           p, x.data(), x.data(), x.data(), static_cast<const T*>(nullptr), x.data(), x.data(),
                           log_sum_exp.data(), x.data(), x.data(), x.data()),
                       doctest::Contains("2^32 or more tiles of 64 queries"), std::invalid_argument);
}

TEST_CASE("fused attention's GPU backward leaves tensor cores for CUDA cores where a block's shared memory is too "
          "small, as on_tensor_cores, which nn's automatic choice asks, foretells") {
  // GPUs of compute capability 8.6, 8.9 and 12.x give a block 99 KiB of dynamic shared memory:
  // the tensor-core dK/dV kernel at head width 128 takes 103 KiB, the forward and dQ 68 KiB.
  using limited = fused_case::set_while<attn::cuda_emulator::runtime::shared_memory_limit>;
  using launch = attn::cuda_backend::fused_attention_launch<attn::cuda_emulator::runtime>;
  using T = attn::bfloat16;
  const tensor_cores_set on(true);
  CHECK(launch::on_tensor_cores<T>(128));
  CHECK(launch::on_tensor_cores<attn::float16>(32));
  CHECK_FALSE(launch::on_tensor_cores<float>(64));  // CUDA cores
  CHECK_FALSE(launch::on_tensor_cores<T>(129));     // wider than any kernel
  {
    const tensor_cores_set off(false);
    CHECK_FALSE(launch::on_tensor_cores<T>(64));
  }
  for (const index_t d : {64, 128}) {
    const fused_case::sizes z{.batch = 2, .heads = 2, .kv_heads = 2, .queries = 70, .keys = 70, .d_k = d, .d_v = d,
                              .causal = true};
    const auto want = run_case<T, attn::cpu>(z, 5);
    const auto everywhere = run_case<T, emulated::gpu>(z, 5);
    const limited small_gpu(99 << 10);
    const auto got = run_case<T, emulated::gpu>(z, 5);  // an sm_90's limit would throw here at 128
    INFO("d = " << d);
    CHECK(got.out == everywhere.out);  // the forward on tensor cores either way
    using part = std::vector<double> fused_case::result::*;
    for (const part p : {&fused_case::result::out, &fused_case::result::d_q, &fused_case::result::d_k,
                         &fused_case::result::d_v})
      CHECK(fused_case::relative(got.*p, want.*p) < std::ldexp(1.0, -7));
    if (d == 64) CHECK(got.d_k == everywhere.d_k);  // fits: tensor cores
    else CHECK(got.d_k != everywhere.d_k);           // CUDA cores
    CHECK(launch::on_tensor_cores<T>(d) == (d == 64));
  }
}

// Each query row takes `inputs` floats a slot on the way (four slots a row on tensor cores), a
// launch of the dQ kernel as many sentences as the runtime's limit holds (256 MiB on a GPU): a
// smaller limit here splits nine short sentences as 256 MiB would split a GPU's batch.
namespace split_launches {

using limited = fused_case::set_while<attn::cuda_emulator::runtime::row_gradient_limit>;  // the emulator's limit

const fused_case::sizes z{.batch = 9, .heads = 2, .kv_heads = 2, .queries = 20, .keys = 20, .d_k = 32, .d_v = 32,
                          .modified = modification::alibi, .heads_in_rows = true, .ragged = true};
constexpr unsigned seed = 7;
// A sentence's query rows (heads × queries) times ALiBi's learned inputs (a slope a head), a slot each.
const std::size_t row_bytes = std::size_t(z.heads * z.queries * z.heads) * sizeof(float);

/// Against the CPU (d_modification to ten times the others' tolerance, as compare's), and, where
/// `same_blocks`, the same bits but for the learned inputs' sums as the call in one launch.
void check(const fused_case::result& got, const fused_case::result& whole, const fused_case::result& want,
           double tolerance, bool same_blocks) {
  using part = std::vector<double> fused_case::result::*;
  for (const part m : {&fused_case::result::out, &fused_case::result::d_q, &fused_case::result::d_k,
                       &fused_case::result::d_v}) {
    CHECK(fused_case::relative(got.*m, want.*m) < tolerance);
    if (same_blocks) CHECK(got.*m == whole.*m);
  }
  CHECK(fused_case::relative(got.d_modification, want.d_modification) < 10 * tolerance);
}

}  // namespace split_launches

TEST_CASE("fused attention's GPU backward sums the learned inputs' gradients over several launches where their "
          "scratch passes the limit: float on CUDA cores") {
  using namespace split_launches;
  using T = float;
  const auto want = run_case<T, attn::cpu>(z, seed);
  const auto whole = run_case<T, emulated::gpu>(z, seed);
  for (const std::size_t sentences : {3, 4}) {  // launches of 3, 3 and 3; of 4, 4 and 1
    INFO(sentences << " sentences a launch");
    const limited small(sentences * row_bytes);
    check(run_case<T, emulated::gpu>(z, seed), whole, want, 1e-5, true);
  }
}

TEST_CASE("fused attention's GPU backward sums the learned inputs' gradients over several launches where their "
          "scratch passes the limit: float16 on tensor cores, launches of whole packed blocks") {
  using namespace split_launches;
  using T = attn::float16;
  const tensor_cores_set on(true);
  const double tolerance = std::ldexp(1.0, -10);
  const auto want = run_case<T, attn::cpu>(z, seed);
  const auto whole = run_case<T, emulated::gpu>(z, seed);  // three sentences a block (64 / 20 rows)
  {
    const limited small(7 * 4 * row_bytes);  // seven sentences' slots, rounded down to two blocks: 6 and 3
    check(run_case<T, emulated::gpu>(z, seed), whole, want, tolerance, true);
  }
  {
    const limited small(2 * 4 * row_bytes);  // two sentences a launch, and so a block: 2, 2, 2, 2, 1
    check(run_case<T, emulated::gpu>(z, seed), whole, want, tolerance, false);
  }
  {
    // One sentence's four slots a row would not fit, its one would: the backward on CUDA cores.
    const limited small(3 * row_bytes);
    const auto got = run_case<T, emulated::gpu>(z, seed);
    check(got, whole, want, tolerance, false);
    CHECK(got.out == whole.out);  // the forward on tensor cores still
    CHECK(got.d_k != whole.d_k);
  }
  {
    const limited small(row_bytes - 4);  // not even one slot a row of one sentence
    const auto call = [&] { return run_case<T, emulated::gpu>(z, seed); };
    CHECK_THROWS_WITH_AS(call(),
                         "attn::fused_attention<cuda>: the score modification's learned inputs (2 numbers) would "
                         "take 320 bytes of scratch for one sentence's 40 query rows (at most 316 bytes); use the "
                         "unfused path (nn::attention_path::unfused)",
                         std::invalid_argument);
  }
}
