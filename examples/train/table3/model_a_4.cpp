// attn-train for the widths of Table 3's row a_4.
#include <attn/cpu.hpp>

#include "../run.hpp"

namespace attn::trainer {
int train_table3_a_4(session& s) { return run<nn::table3::a_4, cpu, float>(s); }
}  // namespace attn::trainer
