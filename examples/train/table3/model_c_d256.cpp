// attn-train for the widths of Table 3's row c_d256.
#include <attn/cpu.hpp>

#include "../run.hpp"

namespace attn::trainer {
int train_table3_c_d256(session& s) { return run<nn::table3::c_d256, cpu, float>(s); }
}  // namespace attn::trainer
