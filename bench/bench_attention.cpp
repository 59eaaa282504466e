// Attention variants on the CPU: forward and forward + backward time and peak tensor memory of a
// multi-head self-attention layer, n = 64 … 4096, d_model 256 and 512 (cases in
// attention_cases.hpp, shared with the GPU). bench/attention_exponents.py fits the exponent of
// time and memory in n per variant beside Table 1's complexity per layer, and draws the charts:
//   build/bench/bench_attention --benchmark_out=attention.json --benchmark_out_format=json
//   python3 bench/attention_exponents.py attention.json --charts docs/images
#include <attn/attn.hpp>

#include "../examples/variant/soft_capped.hpp"
#include "attention_cases.hpp"

int main(int argc, char** argv) {
  attn_bench::register_variants<attn::cpu>("cpu");
  attn_bench::register_variant<attn::cpu, soft_capped>("cpu", "soft-capped");  // a variant of your own
  return attn_bench::run_registered(argc, argv);
}
