// attn-train for the widths of Table 3's row a_1.
#include <attn/cpu.hpp>

#include "../run.hpp"

namespace attn::trainer {
int train_table3_a_1(session& s) { return run<nn::table3::a_1, cpu, float>(s); }
}  // namespace attn::trainer
