// attn-train for the widths of Table 3's row b_16.
#include <attn/cpu.hpp>

#include "../run.hpp"

namespace attn::trainer {
int train_table3_b_16(session& s) { return run<nn::table3::b_16, cpu, float>(s); }
}  // namespace attn::trainer
