// attn-train for the widths of Table 3's row b_32.
#include <attn/cpu.hpp>

#include "../run.hpp"

namespace attn::trainer {
int train_table3_b_32(session& s) { return run<nn::table3::b_32, cpu, float>(s); }
}  // namespace attn::trainer
