// attn-train for the widths of Table 3's row c_ff4096.
#include <attn/cpu.hpp>

#include "../run.hpp"

namespace attn::trainer {
int train_table3_c_ff4096(session& s) { return run<nn::table3::c_ff4096, cpu, float>(s); }
}  // namespace attn::trainer
