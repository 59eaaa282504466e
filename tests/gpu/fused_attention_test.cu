// Fused attention on the GPU (cuda/attn/cuda/fused_attention.cuh) against the CPU kernel
// (fused_attention_cpu.cpp): outputs and every input's gradient, float, double, bfloat16 and
// float16 (the kernel alone: inputs read into float, outputs rounded; 16-bit on CUDA cores and
// on tensor cores, fused_attention_tensor_cores.cuh), for the cases of fused_attention_case.hpp;
// dropout draws the same numbers on both; score modifications with learned inputs (ALiBi, a
// soft cap) compare the inputs' gradients too; bands of keys as key_band and, in float and
// bfloat16, as expressions (grad::pair_rule: the rule's plan asked a pair at a time). The GPU
// kernels give the same bits every run but for dQ on tensor cores, summed with atomics unless the
// backward is asked to be deterministic: that one too. Float gradients to 1e-5 relative: at 1000 keys the
// two sum in different orders (a thread a row against Eigen's blocked products).
#include "gpu_test.cuh"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fused_attention_case.hpp"

namespace fused_case {
std::vector<result> cpu_float();
std::vector<result> cpu_double();
std::vector<result> cpu_bfloat16();
std::vector<result> cpu_float16();
}  // namespace fused_case

namespace {

using namespace gpu_test;

/// Every case on the GPU against the CPU, twice with the fastest backward (on tensor cores dQ
/// summed with atomics: its bits may differ between the runs, the other results' may not) and
/// twice with the deterministic one (every bit the same, and dK, dV and the output the fastest
/// backward's bits: the same code computes them). With `sums_dq` (tensor cores), the two
/// backwards' dQ must differ somewhere, and in the case that reaches the kernels through grad
/// (ALiBi's fixed slopes): proof that the choice gets there.
template <class T>
void compare(const std::vector<fused_case::result>& cpu, double tolerance, const std::string& type,
             bool sums_dq = false) {
  const auto cases = fused_case::cases();
  const auto gpu = fused_case::run_all<T, attn::cuda>();
  settle("fused attention " + type);
  const auto again = fused_case::run_all<T, attn::cuda>();
  settle("fused attention " + type + ", again");
  std::vector<fused_case::result> exact, exact_again;
  {
    const fused_case::deterministic_while deterministic(true);
    exact = fused_case::run_all<T, attn::cuda>();
    settle("fused attention " + type + ", deterministic");
    exact_again = fused_case::run_all<T, attn::cuda>();
    settle("fused attention " + type + ", deterministic again");
  }
  int dq_differs = 0;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    if (!fused_case::runs<T>(cases[c])) continue;
    const std::string name = "fused " + type + " " + cases[c].str();
    dq_differs += gpu[c].d_q != exact[c].d_q;
    if (sums_dq && cases[c].modified != fused_case::modification::none && !cases[c].learns)
      expect(gpu[c].d_q != exact[c].d_q, name + " d_q: summed with atomics through grad, deterministic without");
    const char* parts[] = {"out", "d_q", "d_k", "d_v", "d_modification"};
    using part = std::vector<double> fused_case::result::*;
    const part members[] = {&fused_case::result::out, &fused_case::result::d_q, &fused_case::result::d_k,
                            &fused_case::result::d_v, &fused_case::result::d_modification};
    for (int m = 0; m < 5; ++m) {
      // A learned input's gradient is one sum over a head's every score, whose terms largely
      // cancel (a softmax's gradient sums to 0 along a row): ten times the others' tolerance.
      const double allowed = m == 4 ? 10 * tolerance : tolerance;
      for (const std::vector<fused_case::result>* run : {&gpu, static_cast<const decltype(gpu)*>(&exact)}) {
        const double error = fused_case::relative((*run)[c].*members[m], cpu[c].*members[m]);
        char detail[64];
        std::snprintf(detail, sizeof detail, "relative error %.2e", error);
        expect(error < allowed, name + " " + parts[m] + (run == &exact ? ", deterministic" : ""), detail);
      }
      expect(exact[c].*members[m] == exact_again[c].*members[m], name + " " + parts[m] + " deterministic");
      if (m != 1) {
        expect(gpu[c].*members[m] == again[c].*members[m], name + " " + parts[m] + " the same bits every run");
        expect(gpu[c].*members[m] == exact[c].*members[m], name + " " + parts[m] + " the deterministic backward's bits");
      }
    }
  }
  if (sums_dq)
    expect(dq_differs > 0, "fused " + type + ": d_q summed with atomics differs from the deterministic backward's",
           std::to_string(dq_differs) + " cases differ");
}

/// `--races`: each kernel on the cases of at most 129 queries and keys, once, the outputs
/// unchecked: for compute-sanitizer's racecheck and synccheck (scripts/gpu.sh,
/// ATTN_GPU_RACECHECK), which watch every shared-memory access and would take hours over the
/// whole suite. Races the CPU emulator's two orders of a block's threads hide show there.
int races() {
  namespace tensor_cores = attn::cuda_backend::fused_attention_tensor_cores;
  tensor_cores::enabled() = true;  // bfloat16 on tensor cores, float on CUDA cores
  int ran = 0;
  unsigned seed = 1;
  for (const auto& z : fused_case::cases()) {
    ++seed;
    if (z.queries > 129 || z.keys > 129) continue;
    (void)fused_case::run_one<float, attn::cuda>(z, seed);
    if (fused_case::runs<attn::bfloat16>(z)) {
      (void)fused_case::run_one<attn::bfloat16, attn::cuda>(z, seed);  // dQ summed by the dK/dV kernel
      const fused_case::deterministic_while deterministic(true);
      (void)fused_case::run_one<attn::bfloat16, attn::cuda>(z, seed);  // the dQ kernel
    }
    ++ran;
  }
  settle("fused attention, races");
  expect(ran > 10, "fused attention --races: the small cases ran", std::to_string(ran) + " cases");
  return finish();
}

}  // namespace

int main(int argc, char** argv) {
  if (const int status = skip_without_device(); status != 0) return status;
  if (argc > 1 && std::string(argv[1]) == "--races") {
    try {
      return races();
    } catch (const std::exception& e) {
      fail("fused attention --races", e.what());
      return finish();
    }
  }
  try {
    compare<float>(fused_case::cpu_float(), 1e-5, "float");
    compare<double>(fused_case::cpu_double(), 1e-12, "double");
    // 16-bit on CUDA cores: the same float sums in another order, then rounded: an element may
    // round the other way (one unit in the last place, 2⁻⁷ of bfloat16's at 1, 2⁻¹⁰ of float16's),
    // rarely.
    namespace tensor_cores = attn::cuda_backend::fused_attention_tensor_cores;
    const bool tensor_cores_by_default = tensor_cores::enabled();
    const auto cpu_bfloat16 = fused_case::cpu_bfloat16();
    const auto cpu_float16 = fused_case::cpu_float16();
    tensor_cores::enabled() = false;
    compare<attn::bfloat16>(cpu_bfloat16, std::ldexp(1.0, -8), "bfloat16");
    compare<attn::float16>(cpu_float16, std::ldexp(1.0, -11), "float16");
    // On tensor cores, the weights P and the score gradients dS are rounded to the type before
    // their products, as FlashAttention does, where the CPU kernel keeps them in float: each adds
    // T's rounding error (a relative 2⁻⁹ of bfloat16, 2⁻¹² of float16, at most) to what it feeds,
    // and the outputs are rounded once more. A norm-wise error of about twice T's unit roundoff,
    // with a margin of 2 on top.
    tensor_cores::enabled() = true;
    compare<attn::bfloat16>(cpu_bfloat16, std::ldexp(1.0, -7), "bfloat16 tensor cores", true);
    compare<attn::float16>(cpu_float16, std::ldexp(1.0, -10), "float16 tensor cores", true);
    tensor_cores::enabled() = tensor_cores_by_default;
  } catch (const std::exception& e) {
    fail("fused attention", e.what());
  }
  return finish();
}
