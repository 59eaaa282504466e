// The CPU side of fused_attention_test: fused_attention_case.hpp on the CPU kernel (g++, Eigen).
#include <attn/cpu.hpp>

#include "fused_attention_case.hpp"

namespace fused_case {

std::vector<result> cpu_float() { return run_all<float, attn::cpu>(); }
std::vector<result> cpu_double() { return run_all<double, attn::cpu>(); }
std::vector<result> cpu_bfloat16() { return run_all<attn::bfloat16, attn::cpu>(); }
std::vector<result> cpu_float16() { return run_all<attn::float16, attn::cpu>(); }

}  // namespace fused_case
